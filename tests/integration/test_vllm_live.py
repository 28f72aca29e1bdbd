"""The vLLM example live: two vLLM-flavoured simulated replicas (r1 control, r3 canary at
--max-num-seqs 512), a real Prometheus scraping them with the tier's rendered scrape labels,
`tierctl bench ab` between them, then `tierctl readout --spec` over the window."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import CliResult
from tests.integration.prometheus import needs_prometheus, running_prometheus
from tierctl.realtier.traffic import Traffic
from tierctl.render import render_compose
from tierctl.render.compose import scrape_document
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.normalise import load_services
from tierctl.rollout.plan_schema import SourceRef
from tierctl.runtime.local_prom import wait_for_scrape
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.tier_spec import ScrapeConfig

pytestmark = [needs_prometheus, pytest.mark.integration, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm-llama70b" / "tier.yaml"
R1, R3 = "llama70b-r1", "llama70b-r3"
MODEL = "llama-3.1-70b"  # the example's --served-model-name


def test_bench_ab_and_readout_of_live_vllm_engines(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["engine"]["args"]["host"] = "127.0.0.1"
    for replica in ("r1", "r2", "r3"):
        doc["replicas"][replica]["args"]["port"] = free_port()
    spec_path = tmp_path / "tier.yaml"
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_spec(spec_path)
    compose = tmp_path / "compose.yaml"
    text = render_compose(spec, spec_path=spec_path)
    compose.write_text(text)
    dep = Deployment(
        "new",
        SourceRef(spec=str(compose), path=str(compose), sha256="0" * 64),
        text,
        load_services(text, str(compose)).services,
    )
    scrape = ScrapeConfig(
        target="/etc/prometheus/prometheus.yml",
        address="127.0.0.1:{port}",
        interval_s=1,
        labels={"host_machine": "{host}"},
    )
    config = yaml.safe_dump(
        {"global": {"scrape_interval": "1s"}, **scrape_document(resolve_tier(spec), scrape)}
    )
    driver = LocalDriver(tmp_path / "engines", time_scale=100.0)
    try:
        driver.apply(dep, [R1, R3])
        urls = {svc: driver.endpoint(dep, svc) for svc in (R1, R3)}
        with running_prometheus(tmp_path / "prom", config) as prom:
            start = time.time()
            res = run_cli(
                "bench", "ab", "--a", urls[R1], "--b", urls[R3], "--a-name", "r1",
                "--b-name", "r3", "--hammer-concurrency", "4", "--hammer-count", "40",
                "--hammer-tokens", "256:24", "--order", "ABBA", "--repeat", "2",
                "--output", str(tmp_path / "ab"), "--max-duration", "120",
            )  # fmt: skip
            assert res.code == 0, res.out + res.err
            # Both arms served every request, as their own vllm: counters say.
            for svc in (R1, R3):
                metrics = httpx.get(f"{urls[svc]}/metrics", timeout=10).text
                assert "vllm:request_success_total{" in metrics
            # The readout pairs control and canary step by step, as in production where
            # both replicas take traffic at once; the A/B blocks above run one arm at a time,
            # so a 5 s step rarely holds both. Both arms now serve together for the window.
            start = time.time()
            clients = [
                Traffic(urls[svc], model=MODEL, concurrency=2, max_tokens=24, max_seconds=16)
                for svc in (R1, R3)
            ]
            for traffic in clients:
                traffic.__enter__()
            for traffic in clients:
                traffic.wait_for(10**9, timeout_s=18)  # until max_seconds stops them
                traffic.stop()
                assert traffic.result.sent >= 10
                assert traffic.result.failures == []
            assert wait_for_scrape(prom)  # the last of the traffic is in Prometheus
            end = time.time()
            window = f"{round(end - start)}s"
            out = run_cli(
                "readout", "--spec", str(spec_path), "--prometheus", prom, "--window", window,
                "--end", str(end), "--step", "5s", "--control", "r1", "--canary", "r3",
                "--min-requests", "1", "--format", "json",
            )  # fmt: skip
    finally:
        driver.down_all()
    assert out.code in (0, 1, 3), out.err
    data = json.loads(out.out)
    assert data["engine"] == "vllm"
    assert data["prefix"] == "vllm:"
    assert data["variants_seen"] == {
        "r1": ["llama70b-tp8-b8192-seqs256"],
        "r3": ["llama70b-tp8-b8192-seqs512"],
    }
    assert data["drift"] == []
    rows = {m["key"]: m for m in data["metrics"]}
    # The engines' own histograms were read: both arms have TTFT in the window.
    assert rows["ttft_p50"]["control_median"] is not None
    assert rows["ttft_p50"]["canary_median"] is not None
    assert data["aborts"]["control_total"] >= 40
