"""`catalog build` on a terminal lets pip draw its download bar; elsewhere pip stays quiet."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tierctl.catalog import wheel


def _fake_pip(calls: list[list[str]], cache: Path):
    def run(argv: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        (cache / "sglang-0.5.23-py3-none-any.whl").write_bytes(b"")
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    return run


@pytest.mark.parametrize("tty", [True, False])
def test_pip_progress_only_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(wheel.subprocess, "run", _fake_pip(calls, tmp_path))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    found = wheel.download_wheel("sglang", "0.5.23", tmp_path)
    assert found.name == "sglang-0.5.23-py3-none-any.whl"
    (argv,) = calls
    assert ("--progress-bar" in argv) is tty
    assert ("--quiet" in argv) is not tty
    assert argv[-1] == "sglang==0.5.23"
