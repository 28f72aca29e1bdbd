"""`make demo-real` never ends on one red line (#37): a stage that cannot go on prints
"verdict: not reached", where and why it stopped, and the next command to run; the command
it prints parses as the demo's own."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tierctl.cli.real_engine import demo_cmd
from tierctl.errors import GateFailed
from tierctl.realtier import demo


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        (demo.DemoStopped("stage 5/7: the rollout of r2 failed", "tierctl x", 1), 1,
         "stage 5/7: the rollout of r2 failed"),
        (GateFailed("r2: health gate failed", fix="look at its log"), 1, "r2: health gate failed"),
    ],
)  # fmt: skip
def test_a_stopped_demo_says_where_why_and_what_next(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raised: Exception,
    code: int,
    said: str,
) -> None:
    def stop(*_a: Any, **_k: Any) -> int:
        raise raised

    monkeypatch.setattr(demo, "_demo", stop)
    assert demo.run_demo(tmp_path, start_timeout_s=600, live_s=120, soak_s=20) == code
    out = capsys.readouterr().out
    assert "verdict: not reached" in out
    assert f"stopped: {said}" in " ".join(out.split())
    assert "next: tierctl" in out


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_next_command_is_the_demo_s_own_line(engine: str) -> None:
    line = demo._again(Path("/tmp/w"), (600.0, 120.0, 20.0), engine=engine, start_timeout_s=1200.0)
    argv = shlex.split(line)
    assert argv[:3] == ["tierctl", "real-engine", "demo"]
    ctx = demo_cmd.make_context("demo", argv[3:])
    assert ctx.params["engine"] == engine  # the same engine's demo again, not vLLM's
    assert ctx.params["start_timeout_s"] == 1200.0
    assert ctx.params["live_s"] == 120.0
    assert ctx.params["workdir"] == Path("/tmp/w")
