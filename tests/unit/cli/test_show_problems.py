"""``tierctl show``, the first command one runs, reports what ``render`` warns about."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import GLM_SPEC, CliResult


def _typo(tmp_path: Path) -> Path:
    spec = tmp_path / "tier.yaml"
    text = GLM_SPEC.read_text(encoding="utf-8")
    spec.write_text(text.replace("    max-running-requests: 16", "    max-runing-requests: 16"))
    return spec


def test_show_reports_an_unknown_flag_as_render_does(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = _typo(tmp_path)
    shown = run_cli("show", str(spec))
    assert shown.code == 0
    assert "--max-runing-requests is not a flag of sglang 0.5.23" in shown.err
    assert "did you mean --max-running-requests" in shown.err
    assert "tier.yaml:28" in shown.err
    rendered = run_cli("render", str(spec))
    warned = [line for line in rendered.err.splitlines() if line.startswith("warning:")]
    assert warned
    assert all(line in shown.err for line in warned)
    doc = json.loads(run_cli("show", "--format", "json", str(spec)).out)
    assert any("--max-runing-requests" in p for p in doc["problems"])


def test_show_of_a_clean_spec_reports_no_problem(run_cli: Callable[..., CliResult]) -> None:
    shown = run_cli("show", str(GLM_SPEC))
    assert shown.code == 0
    assert "warning" not in shown.err
    assert json.loads(run_cli("show", "--format", "json", str(GLM_SPEC)).out)["problems"] == []
