"""Readout of a vLLM tier against a real Prometheus: vllm: series found from the spec's engine,
--prefix vllm: accepted, and metric-name drift named instead of "no data"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult
from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import backfill, needs_prometheus, running_prometheus
from tierctl.engines import SGLANG, VLLM
from tierctl.readout import Arm, PrometheusClient, run_readout

pytestmark = [needs_prometheus, pytest.mark.integration]

END_S = 1_767_225_600  # 2026-01-01T00:00:00Z
START_S = END_S - 6 * 3600
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm-llama70b" / "tier.yaml"
ARMS = [
    ArmData("llama70b-r1", "llama70b-tp8-b8192-seqs256"),
    ArmData("llama70b-r3", "llama70b-tp8-b8192-seqs512", tpot_x=0.7),
    # An older vLLM: inter-token latency under its pre-V1 name.
    ArmData("old-vllm", "x", renamed={"itl": "time_per_output_token_seconds"}),
]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("prom-vllm")
    data = work / "data"
    backfill(openmetrics(ARMS, START_S, END_S, engine=VLLM), data)
    with running_prometheus(work, data_dir=data) as url:
        yield url


def _readout(url: str, canary: str, **kw: object):  # type: ignore[no-untyped-def]
    with PrometheusClient(url) as client:
        return run_readout(
            client,
            Arm("r1", 'container_name="llama70b-r1"', "llama70b-tp8-b8192-seqs256"),
            Arm("r3", f'container_name="{canary}"'),
            start_s=START_S + 600,
            end_s=END_S,
            step_s=300,
            tolerance=0.1,
            **kw,  # type: ignore[arg-type]
        )


def test_vllm_series_are_found_and_judged(prom_url: str) -> None:
    for kw in ({}, {"engine": VLLM}, {"prefix": "vllm:"}):
        result = _readout(prom_url, "llama70b-r3", **kw)
        assert result.engine == "vllm"
        assert result.prefix == "vllm:"
        assert result.verdict == "pass", (kw, result.reasons)
        rows = {m.key: m.result for m in result.metrics}
        assert rows["tpot_p50"].verdict == "better"
        assert 0.6 < rows["tpot_p50"].ratio < 0.8
        assert result.variants_seen == {
            "r1": ["llama70b-tp8-b8192-seqs256"],
            "r3": ["llama70b-tp8-b8192-seqs512"],
        }
        # Pooled from request_success_total by finished_reason.
        assert result.aborts.control_total > 1000
        assert result.drift == ()


def test_a_renamed_family_is_named_not_no_data(prom_url: str) -> None:
    result = _readout(prom_url, "old-vllm")
    assert result.verdict == "inconclusive"
    line = (
        "vllm:inter_token_latency_seconds_bucket is present for r1 and absent for r3; "
        "r3 has vllm:time_per_output_token_seconds_bucket instead"
    )
    assert line in result.drift
    assert f"metric names differ: {line}" in result.reasons
    assert not any("not enough paired steps for TPOT" in r for r in result.reasons)
    # The families both arms have are still compared.
    rows = {m.key: m.result for m in result.metrics}
    assert rows["ttft_p50"].verdict in ("same", "inconclusive")


def test_the_wrong_engine_says_which_series_are_there(prom_url: str) -> None:
    result = _readout(prom_url, "llama70b-r3", engine=SGLANG)
    assert result.verdict == "inconclusive"
    assert any(
        d.startswith("no sglang: series for either arm; the window holds vllm:")
        for d in result.drift
    )


def test_cli_readout_of_the_vllm_example(
    prom_url: str, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    args = [
        "readout",
        "--spec",
        str(EXAMPLE),
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
    res = run_cli(*args, "--format", "json")
    assert res.code == 0, res.out + res.err
    data = json.loads(res.out)
    assert data["verdict"] == "pass"
    assert data["engine"] == "vllm"
    assert run_cli(*args, "--prefix", "vllm:", "--format", "json").code == 0
    wrong = run_cli(*args, "--prefix", "sglang:")
    assert wrong.code == 2
    assert "the prefix 'sglang:' is SGLang's, the spec's engine is vLLM" in wrong.err
    # An sglang spec over the same data: the drift line says what the window holds.
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["engine"]["kind"] = "sglang"
    doc["engine"]["version"] = "0.5.23"
    doc["engine"]["args"] = {"model-path": "/m", "port": 30000, "max-running-requests": 256}
    doc["replicas"]["r3"]["args"] = {"port": 30003, "max-running-requests": 512}
    doc["telemetry"] = {"variant": "v{max-running-requests}", "places": ["service-labels"]}
    spec = tmp_path / "sglang.tier.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    swapped = [a if a != str(EXAMPLE) else str(spec) for a in args]
    res = run_cli(*swapped, "--format", "json")
    assert res.code == 3, res.out + res.err
    assert "window holds vllm:" in " ".join(json.loads(res.out)["drift"])
