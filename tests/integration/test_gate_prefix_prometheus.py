"""The Prometheus variant gates read the series a real Prometheus holds, under whichever
prefix it holds them: as the engine exports them (``vllm:``, ``sglang:``) or as a pipeline
rewrote them (``vllm_``, ``sglang_``).

Per engine, a simulated engine (``tierctl sim serve`` under the local driver, answering as
that engine with its profile's metric names) is scraped by a real Prometheus twice: once as
exported, under one container name, and once through a ``metric_relabel_configs`` rewrite of
``:`` to ``_``, under another. The gate must find each container's variant.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.integration.prometheus import needs_prometheus, running_prometheus
from tierctl.engines import profile_for
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import load_sides
from tierctl.rollout.gates import GateContext, GateSettings, gate_prometheus_variants
from tierctl.rollout.plan_schema import Step
from tierctl.rollout.planner import plan_files
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port

pytestmark = [pytest.mark.integration, needs_prometheus]

COMMANDS = {
    "sglang": ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--enable-metrics"],
    "vllm": ["vllm", "serve", "/models/m", "--served-model-name", "m"],
}


def _scrape_config(port: int, engine: str) -> str:
    """Two jobs over one engine: as exported, and with the prefix's ``:`` rewritten."""
    target = {"targets": [f"127.0.0.1:{port}"]}

    def job(name: str, container: str, rewrite: bool) -> dict[str, object]:
        out: dict[str, object] = {
            "job_name": name,
            "scrape_interval": "1s",
            "static_configs": [
                {**target, "labels": {"container_name": container, "config_variant": "v2"}}
            ],
        }
        if rewrite:
            out["metric_relabel_configs"] = [
                {
                    "source_labels": ["__name__"],
                    "regex": f"{engine}:(.*)",
                    "target_label": "__name__",
                    "replacement": f"{engine}_${{1}}",
                }
            ]
        return out

    doc = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            job("exported", f"{engine}-exported", False),
            job("rewritten", f"{engine}-rewritten", True),
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture(params=["sglang", "vllm"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    kind = str(request.param)
    port = free_port()
    compose = {"services": {"eng": {"command": [*COMMANDS[kind], "--port", str(port)]}}}
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(compose))
    dep, _ = load_sides(plan_files(str(path), str(path)))
    driver = LocalDriver(tmp_path / "state", time_scale=200.0, start_timeout_s=120)
    try:
        driver.apply(dep, ["eng"])
        yield kind, port
    finally:
        driver.down_all()


def _gate(prometheus: str, kind: str, container: str, client: httpx.Client) -> GateContext:
    step = Step(
        id="02", action="recreate", service="col", role="collector", side="new", why="", rollback=""
    )
    return GateContext(
        step=step,
        base_url=None,
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(prometheus_url=prometheus, metrics_timeout_s=60, poll_interval_s=0.5),
        client=client,
        recreated_engines={container: "v2"},
        engine_profiles={container: profile_for(kind)},
    )


def test_the_variant_gate_finds_the_series_under_either_prefix_spelling(
    engine: tuple[str, int], tmp_path: Path
) -> None:
    kind, port = engine
    profile = profile_for(kind)
    with (
        running_prometheus(tmp_path / "prom", _scrape_config(port, kind)) as url,
        httpx.Client() as client,
    ):
        # Both jobs scraped once: the series exist under both spellings.
        wanted = {f"{p}{profile.metrics.running}" for p in profile.metric_prefixes}
        names: set[str] = set()

        def scraped() -> bool:
            names.clear()
            names.update(client.get(f"{url}/api/v1/label/__name__/values").json()["data"])
            return wanted <= names

        assert wait_until(scraped, 60, poll_s=0.5), sorted(n for n in names if n.startswith(kind))
        for container, prefix in (
            (f"{kind}-exported", f"{kind}:"),
            (f"{kind}-rewritten", f"{kind}_"),
        ):
            ctx = _gate(url, kind, container, client)
            gate_prometheus_variants(ctx)
            assert ctx.notes == [
                f"prometheus: {container} reports v2 ({prefix}{profile.metrics.running})"
            ]
