"""Readout against a real Prometheus server holding 6 hours of backfilled SGLang metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import READOUT_SPEC, backfilled_prometheus, needs_prometheus
from tierctl.readout import Arm, PrometheusClient, run_readout

pytestmark = [needs_prometheus, pytest.mark.integration]

# A fixed window, hours in the past of any plausible test run and inside 30 days' retention
# is not needed: backfilled blocks are kept regardless of age until compaction/retention runs.
END_S = 1_767_225_600  # 2026-01-01T00:00:00Z
START_S = END_S - 6 * 3600
ARMS = [
    ArmData("ctl", "v-pdi1"),
    ArmData("good", "v-pdi2", ttft_x=1.0, tpot_x=0.6),
    ArmData("slow", "v-slow", ttft_x=1.35, tpot_x=1.0),
    ArmData("aborty", "v-aborty", abort_p=0.06),
    ArmData("svc-r1", "tier-pdi1"),
    ArmData("svc-r2", "tier-pdi2", tpot_x=0.7),
]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with backfilled_prometheus(
        tmp_path_factory.mktemp("prom"), openmetrics(ARMS, START_S, END_S)
    ) as url:
        yield url


def _readout(url: str, canary: str, **kw: object):  # type: ignore[no-untyped-def]
    with PrometheusClient(url) as client:
        return run_readout(
            client,
            Arm("r1", 'container_name="ctl"', "v-pdi1"),
            Arm("r2", f'container_name="{canary}"'),
            start_s=START_S + 600,
            end_s=END_S,
            step_s=300,
            **kw,  # type: ignore[arg-type]
        )


def test_faster_decode_passes_with_tpot_better_and_ttft_same(prom_url: str) -> None:
    result = _readout(prom_url, "good")
    rows = {m.key: m.result for m in result.metrics}
    assert result.verdict == "pass", result.reasons
    assert rows["tpot_p50"].verdict == "better"
    assert 0.5 < rows["tpot_p50"].ratio < 0.72
    assert rows["ttft_p50"].verdict in ("same", "inconclusive")
    assert rows["ttft_p50"].ci_low < 1.0 < rows["ttft_p50"].ci_high
    assert rows["tpot_p50"].n_used == rows["tpot_p50"].n_steps  # no missing steps
    assert result.variants_seen["r1"] == ["v-pdi1"]
    assert result.prefix == "sglang:"


def test_slower_ttft_fails_on_the_guard(prom_url: str) -> None:
    result = _readout(prom_url, "slow")
    assert result.verdict == "fail"
    assert any("TTFT" in r for r in result.reasons)
    ttft = next(m.result for m in result.metrics if m.key == "ttft_p50")
    assert ttft.verdict == "worse"
    assert 1.2 < ttft.ratio < 1.5


def test_sparse_aborts_are_judged_on_pooled_counts(prom_url: str) -> None:
    result = _readout(prom_url, "aborty")
    assert result.aborts.verdict == "worse"
    assert result.aborts.canary_events > 3 * result.aborts.control_events
    assert result.verdict == "fail"
    assert any("abort" in r for r in result.reasons)


def test_missing_canary_is_inconclusive_not_a_pass(prom_url: str) -> None:
    result = _readout(prom_url, "absent")
    assert result.verdict == "inconclusive"
    assert any("no series for r2" in w for w in result.warnings)


def test_cli_readout_from_spec(
    prom_url: str, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = tmp_path / "tier.yaml"
    spec.write_text(READOUT_SPEC)
    args = [
        "readout",
        "--spec",
        str(spec),
        "--prometheus",
        prom_url,
        "--window",
        "5h",
        "--end",
        str(END_S),
        "--step",
        "5m",
        "--tolerance",
        "0.1",
    ]
    result = run_cli(*args)
    assert result.code == 0, result.out + result.err
    assert "PASS" in result.out
    assert "TPOT p50" in result.out
    as_json = run_cli(*args, "--format", "json")
    data = json.loads(as_json.out)
    assert data["verdict"] == "pass"
    assert data["variants_seen"] == {"r1": ["tier-pdi1"], "r2": ["tier-pdi2"]}
    md = run_cli(*args, "--format", "markdown")
    assert md.out.startswith("## Readout: canary r2 vs control r1")
    bad = run_cli("readout", "--spec", str(spec), "--prometheus", prom_url, "--window", "5 hours")
    assert bad.code == 2
    assert "is not a duration" in bad.err
