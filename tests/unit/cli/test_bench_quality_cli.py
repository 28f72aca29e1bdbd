"""`tierctl bench quality`: bad options are exit 2 with the rule and the fix, no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

A, B = "http://127.0.0.1:1", "http://127.0.0.1:2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "bad"], "bad --tasks 'bad'"),
        (["--passkey", "512,x"], "bad --passkey '512,x'"),
        (["--concurrency", "0"], "bad quality option concurrency"),
        (["--texts", "-1"], "bad quality option count"),
        (["--tasks", "x=/nonexistent/t.jsonl"], "cannot read /nonexistent/t.jsonl"),
    ],
)
def test_bad_quality_options_exit_2(
    run_cli: Callable[..., Any], args: list[str], message: str
) -> None:
    r = run_cli("bench", "quality", A, B, *args)
    assert r.code == 2, r.out + r.err
    assert message in r.err
    assert "fix:" in r.err
    assert "Traceback" not in r.err


def test_a_bad_task_line_names_its_line(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": 3}\n')
    r = run_cli("bench", "quality", A, B, "--tasks", f"t={f}:number")
    assert r.code == 2
    assert f"{f}:2" in r.err
    assert "needs a string 'prompt' and an 'answer'" in r.err


def test_unreachable_arm_is_a_runtime_failure(run_cli: Callable[..., Any]) -> None:
    r = run_cli("bench", "quality", A, B, "--texts", "1", "--arithmetic", "0")
    assert r.code == 1
    assert "cannot reach `A_URL`" in r.err
