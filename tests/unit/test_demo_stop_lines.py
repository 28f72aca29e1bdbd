"""`tierctl demo` never ends on one red line (#37): a failing stage says where it stopped, where
its files are and the next command, and that command parses as the demo's own."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from rich.console import Console

import tierctl.demo as demo
from tierctl.cli.demo import demo as demo_cmd


def test_a_failing_stage_names_itself_its_files_and_the_next_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(demo, "_stages", lambda: [("act 0: render", lambda _ctx: False, None)])
    console = Console(record=True, width=200)
    assert demo.run_demo(demo.DEFAULT_SPEC, console=console) is False
    text = console.export_text()
    assert "verdict: not reached" in text
    assert "stopped at stage 'act 0: render'" in text
    assert "files of the run (journal, A/B report, logs): /" in text
    line = next(x for x in text.splitlines() if x.startswith("next: "))
    first = line.removeprefix("next: ").split(" (the same run")[0]
    argv = shlex.split(first)
    assert argv[:2] == ["tierctl", "demo"]
    assert argv[-1] == "--debug"  # taken anywhere on the line by tierctl's main
    argv = argv[:-1]
    ctx = demo_cmd.make_context("demo", argv[2:])
    assert ctx.params["spec"] == Path(demo.DEFAULT_SPEC)
