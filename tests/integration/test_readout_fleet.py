"""``readout --fleet`` against a real Prometheus holding 8 hours of backfilled SGLang series
from several hosts (``host_machine``), the canary wave landing half-way.

The mutation cases: a regression planted on the canary host after the change is caught; a
canary host that is slow before and after (a host effect, no canary effect) is not called a
regression, though the unblocked comparison of the same series would call it one; inside each
host, a canary regression on one host of three is caught and a host whose two replicas are both
slow is not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult
from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import READOUT_SPEC, backfilled_prometheus, needs_prometheus
from tierctl.readout import Arm, PrometheusClient, run_readout
from tierctl.readout.fleet import FleetReadout, FleetReadoutHost, run_fleet_readout

pytestmark = [needs_prometheus, pytest.mark.integration]

END_S = 1_767_225_600
CHANGE_S = END_S - 4 * 3600
START_S = END_S - 8 * 3600
ARMS = [
    # between hosts: the canary wave changed a-gpu02 or b-gpu02 at CHANGE_S; gpu03, gpu04 did
    # not change.
    ArmData("model-r1", "v1", host="a-gpu02", change_s=CHANGE_S, after_ttft_x=1.35),
    ArmData("model-r1", "v1", host="b-gpu02", ttft_x=1.4, tpot_x=1.3),  # slow, all along
    ArmData("model-r1", "v1", host="gpu03"),
    ArmData("model-r1", "v1", host="gpu04"),
    # within each host: r1 control, r2 canary.
    ArmData("svc-r1", "tier-pdi1", host="d-gpu02"),
    ArmData("svc-r2", "tier-pdi2", host="d-gpu02"),
    ArmData("svc-r1", "tier-pdi1", host="d-gpu03"),
    ArmData("svc-r2", "tier-pdi2", host="d-gpu03", ttft_x=1.6),  # the planted regression
    ArmData("svc-r1", "tier-pdi1", host="d-gpu04", ttft_x=1.5),  # a slow host: both replicas
    ArmData("svc-r2", "tier-pdi2", host="d-gpu04", ttft_x=1.5),
]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = openmetrics(ARMS, START_S, END_S, scrape_s=60, seed=11)
    with backfilled_prometheus(tmp_path_factory.mktemp("prom"), data) as url:
        yield url


def _between(url: str, canary: str) -> FleetReadout:
    with PrometheusClient(url) as client:
        hosts = [
            FleetReadoutHost(canary, "canary", client, f'host_machine="{canary}"'),
            FleetReadoutHost("gpu03", "control", client, 'host_machine="gpu03"'),
            FleetReadoutHost("gpu04", "control", client, 'host_machine="gpu04"'),
        ]
        return run_fleet_readout(
            hosts, start_s=CHANGE_S, end_s=END_S, step_s=300, baseline=(START_S, CHANGE_S)
        )


def _row(result: FleetReadout, key: str):  # type: ignore[no-untyped-def]
    return next(m.result for m in result.metrics if m.key == key)


def test_a_regression_planted_on_the_canary_host_is_caught(prom_url: str) -> None:
    result = _between(prom_url, "a-gpu02")
    assert result.design == "between-hosts"
    assert result.verdict == "fail", result.reasons
    ttft = _row(result, "ttft_p50")
    assert ttft.verdict == "worse"
    assert 1.2 < ttft.ratio < 1.5
    assert any("TTFT" in r for r in result.reasons)
    per_host = {h.host: h.ratios["ttft_p50"] for h in result.hosts}
    assert 1.2 < per_host["a-gpu02"] < 1.5  # its own after/before
    assert 0.9 < per_host["gpu03"] < 1.1


def test_a_host_effect_without_a_canary_effect_is_not_a_regression(prom_url: str) -> None:
    result = _between(prom_url, "b-gpu02")
    assert result.verdict != "fail", result.reasons
    for key in ("ttft_p50", "ttft_p95", "e2e_p50"):
        assert _row(result, key).verdict in ("same", "inconclusive"), key
        assert 0.9 < _row(result, key).ratio < 1.1, key
    # The mutation: the same series compared unblocked (canary host vs control hosts after
    # the change, no baseline) call the slow host a regression.
    with PrometheusClient(prom_url) as client:
        naive = run_readout(
            client,
            Arm("control hosts", 'host_machine=~"gpu03|gpu04"'),
            Arm("canary host", 'host_machine="b-gpu02"'),
            start_s=CHANGE_S,
            end_s=END_S,
            step_s=300,
        )
    assert naive.verdict == "fail"


def _within(url: str, hosts: list[str]) -> FleetReadout:
    with PrometheusClient(url) as client:
        return run_fleet_readout(
            [FleetReadoutHost(h, "control", client, f'host_machine="{h}"') for h in hosts],
            start_s=CHANGE_S, end_s=END_S, step_s=300,
            replicas=('container_name="svc-r1"', 'container_name="svc-r2"'),
        )  # fmt: skip


def test_within_each_host_a_canary_regression_on_one_host_is_caught(prom_url: str) -> None:
    result = _within(prom_url, ["d-gpu02", "d-gpu03", "d-gpu04"])
    assert result.design == "within-host"
    assert result.verdict == "fail", result.reasons
    rows = {h.host: h for h in result.hosts}
    assert rows["d-gpu03"].verdicts["ttft_p50"] == "worse"
    assert rows["d-gpu04"].verdicts["ttft_p50"] == "same"  # both replicas slow: no canary effect
    assert 1.1 < _row(result, "ttft_p50").ratio < 1.3  # (1 x 1.6 x 1) ** (1/3) = 1.17


def test_within_each_host_a_slow_host_alone_is_not_a_regression(prom_url: str) -> None:
    result = _within(prom_url, ["d-gpu02", "d-gpu04"])
    assert result.verdict != "fail", result.reasons
    assert _row(result, "ttft_p50").verdict == "same"


def _fleet_file(tmp: Path, canary: str, url: str) -> Path:
    hosts = [canary, "gpu03", "gpu04"]
    doc = {
        "fleet": "f", "old": "v1", "new": "v2",
        "hosts": [
            {"name": h, "file": f"{h}/compose.yaml", "agent_url": f"http://127.0.0.1:{9100 + i}",
             "prometheus": url, "labels": {"role": "canary" if i == 0 else "control"}}
            for i, h in enumerate(hosts)
        ],
    }  # fmt: skip
    path = tmp / f"fleet-{canary}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    # The rollout's journal dates the canary wave (wave 1 began and finished at CHANGE_S).
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(CHANGE_S, UTC).isoformat(timespec="seconds")
    lines = [
        {"event": "wave-begin", "wave": 1, "hosts": [canary], "at": at},
        {"event": "wave-done", "wave": 1, "at": at},
        {"event": "awaiting-approval", "wave": 2, "hosts": hosts[1:], "at": at},
    ]
    path.with_suffix(".journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_cli_readout_fleet_dates_the_change_from_the_journal(
    prom_url: str, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    common = ["--window", "4h", "--end", str(END_S), "--step", "5m"]
    bad = run_cli("readout", "--fleet", str(_fleet_file(tmp_path, "a-gpu02", prom_url)), *common)
    assert bad.code == 1, bad.out + bad.err
    assert "design: between-hosts" in bad.out
    assert "a-gpu02" in bad.out
    assert "FAIL" in bad.out
    fine = run_cli(
        "readout", "--fleet", str(_fleet_file(tmp_path, "b-gpu02", prom_url)), *common,
        "--format", "json",
    )  # fmt: skip
    data = json.loads(fine.out)
    assert data["verdict"] != "fail"
    assert fine.code in (0, 3)
    assert data["design"] == "between-hosts"
    assert data["baseline"] == [CHANGE_S - 4 * 3600, CHANGE_S]
    assert [h["role"] for h in data["hosts"]] == ["canary", "control", "control"]
    spec = tmp_path / "tier.yaml"
    spec.write_text(READOUT_SPEC)
    fleet = tmp_path / "d.yaml"
    doc = yaml.safe_load(_fleet_file(tmp_path, "d-gpu02", prom_url).read_text())
    for i, name in enumerate(["d-gpu02", "d-gpu03", "d-gpu04"]):
        doc["hosts"][i]["name"] = name
    fleet.write_text(yaml.safe_dump(doc))
    within = run_cli(
        "readout", "--fleet", str(fleet), "--design", "within-host", "--spec", str(spec), *common,
        "--format", "markdown",
    )  # fmt: skip
    assert within.code == 1, within.out + within.err
    assert "Design `within-host`" in within.out
    missing = run_cli("readout", "--fleet", str(fleet), "--design", "within-host", *common)
    assert missing.code == 2
    assert "needs --spec" in missing.err
