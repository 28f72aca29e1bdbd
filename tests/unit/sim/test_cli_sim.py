"""`tierctl sim run/compare/fit` as an operator sees them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GLM_SPEC


def test_run_json_reports_every_request(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--workload", "burst", "--count", "2", "--input-tokens", "50000",
                  "--format", "json", "--", "--chunked-prefill-size", "8192")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert [r["status"] for r in doc["requests"]] == ["completed", "completed"]
    assert doc["argv"] == ["--chunked-prefill-size", "8192"]


def test_run_from_spec_replica_uses_its_interval(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--spec", str(GLM_SPEC), "--replica", "r2", "--workload", "burst",
                  "--count", "1", "--input-tokens", "40000", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    argv = json.loads(res.out)["argv"]
    assert argv[argv.index("--prefill-decode-interval") + 1] == "2"


def test_compare_prints_the_ratio_table(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "compare", "--spec", str(GLM_SPEC), "--control-replica", "r1",
                  "--candidate-replica", "r2", "--workload", "field", "--focus", "dec")  # fmt: skip
    assert res.code == 0, res.err
    rows = {line.split()[0] + line.split()[1]: line.split() for line in res.out.splitlines()[2:]}
    # metric (two words), control, candidate, ratio [interval], A/A floor, verdict
    assert float(rows["TPOTp50"][4]) < 0.9
    assert rows["TPOTp50"][-1] == "better"
    assert float(rows["TTFTp50"][4]) < 1.05


def test_bad_engine_flag_is_exit_2_without_traceback(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--", "--prefill-decode-interval", "-3")
    assert res.code == 2
    assert "--prefill-decode-interval must be >= 0" in res.err
    assert "Traceback" not in res.err


def test_unknown_replica_is_exit_2(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--spec", str(GLM_SPEC), "--replica", "r9")
    assert res.code == 2
    assert "no replica 'r9'" in res.err
    assert "r1, r2" in res.err


def test_fit_prints_coefficients(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    p = tmp_path / "steps.jsonl"
    lines = []
    for b in range(1, 6):
        lines.append({"kind": "decode", "batch_size": b, "context_tokens": 1000 * b,
                      "duration_s": 0.0005 + 0.01 + 0.001 * b + 1e-6 * 1000 * b})  # fmt: skip
    for c in (1000, 2000, 4000, 8000):
        lines.append({"kind": "prefill", "new_tokens": c, "cached_tokens": c,
                      "duration_s": 0.0005 + 0.02 + 1e-5 * c + 1e-9 * c * (c + c / 2)})  # fmt: skip
    p.write_text("\n".join(json.dumps(x) for x in lines))
    res = run_cli("sim", "fit", str(p), "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert abs(doc["decode_per_seq_s"] - 0.001) < 1e-6
    assert abs(doc["prefill_per_token_s"] - 1e-5) < 1e-7


def test_serve_with_a_bad_flag_exits_2_before_listening(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "serve", "--", "--port", "0", "--max-running-requests", "lots")
    assert res.code == 2
    assert "--max-running-requests" in res.err
    assert "listening" not in res.out


def test_health_generation_follows_the_flag_then_sglangs_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tierctl.cli.sim import _health_generation

    monkeypatch.delenv("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", raising=False)
    assert _health_generation(None) is False
    assert _health_generation(True) is True
    monkeypatch.setenv("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true")
    assert _health_generation(None) is True
    assert _health_generation(False) is False
    monkeypatch.setenv("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "0")
    assert _health_generation(None) is False
