"""The server-info comparison and the rendered scrape labels the gates rely on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from rollout_examples import R1, R2, r2_at_interval_1, render_variant

from tierctl.engines.sglang import PROFILE as SGLANG
from tierctl.errors import GateFailed
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.entrypoints import make_plan, make_runbook
from tierctl.rollout.gates import (
    GateContext,
    GateSettings,
    gate_prometheus_variants,
    scrape_variants,
)
from tierctl.rollout.normalise import load_services
from tierctl.rollout.plan_schema import Plan, SourceRef, Step
from tierctl.runtime.promtext import metric_total, parse_metrics

server_info_mismatches = SGLANG.server_info_mismatches

ARGV = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--port",
    "30002",
    "--tp-size",
    "4",
    "--mem-fraction-static",
    "0.82",
    "--enable-metrics",
    "--served-model-name",
    "glm",
]
INFO = {
    "port": 30002,
    "tp_size": 4,
    "mem_fraction_static": 0.82,
    "enable_metrics": True,
    "served_model_name": "glm",
    "prefill_decode_interval": 0,
}


def test_reported_args_match_as_parsed_tokens() -> None:
    assert server_info_mismatches(ARGV, INFO) == []


def test_a_different_or_missing_value_is_named() -> None:
    info = {**INFO, "tp_size": 8}
    del info["enable_metrics"]
    assert server_info_mismatches(ARGV, info) == [
        "--tp-size: rendered 4, engine reports 8",
        "--enable-metrics: rendered (set), not reported",
    ]


def test_a_bare_flag_the_engine_reports_off_is_a_mismatch() -> None:
    assert server_info_mismatches(ARGV, {**INFO, "enable_metrics": False}) == [
        "--enable-metrics: rendered (set), engine reports False"
    ]


def _deployment(path: Path) -> Deployment:
    text = path.read_text()
    return Deployment(
        "new",
        SourceRef(spec="n", path="n", sha256="0" * 64),
        text,
        load_services(text, "n").services,
    )


def test_scrape_variants_come_from_the_rendered_collector_config(tmp_path: Path) -> None:
    variants = scrape_variants(_deployment(render_variant(tmp_path, "new")))
    assert variants[R1].endswith("dyntok-pdi1-h200-tp4")
    assert variants[R2].endswith("dyntok-pdi2-h200-tp4")


def test_metric_totals_accept_both_spellings() -> None:
    samples = parse_metrics(
        '# HELP x\nsglang:num_aborted_requests_total{model_name="m"} 2\n'
        'sglang_num_aborted_requests_total{model_name="n"} 1\nother 5\n'
    )
    assert metric_total(samples, "sglang:num_aborted_requests_total") == 3
    assert metric_total(samples, "sglang:e2e_request_latency_seconds_count") is None


def _tier_variant(doc: dict[str, Any]) -> None:
    doc["telemetry"]["label"] = "tier_variant"


def test_the_variant_label_comes_from_the_spec(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old", lambda d: (_tier_variant(d), r2_at_interval_1(d)))
    new = render_variant(tmp_path, "new", _tier_variant)
    spec = tmp_path / "new.tier.yaml"
    plan = make_plan(str(old), str(new), spec=spec)
    assert plan.variant_label == "tier_variant"
    r2 = next(s for s in plan.steps if s.service == R2)
    assert r2.variant is not None
    assert r2.variant.endswith("pdi2-h200-tp4")
    scraped = scrape_variants(_deployment(new), plan.variant_label)
    assert scraped[R2] == r2.variant
    # Read under the default label, the same files show no variant at all.
    assert scrape_variants(_deployment(new)) == {}
    assert make_plan(str(old), str(new)).steps[0].variant is None
    runbook = make_runbook(str(old), str(new), spec=spec)
    assert "count by (container_name, tier_variant)" in runbook
    assert "config_variant" not in runbook


def _prometheus_ctx(label: str, reported: dict[str, str]) -> tuple[GateContext, list[str]]:
    queries: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        queries.append(request.url.params["query"])
        result = [{"metric": {"container_name": R2, **reported}, "value": [0, "1"]}]
        return httpx.Response(200, json={"status": "success", "data": {"result": result}})

    step = Step(
        id="02", action="recreate", service="col", role="collector", side="new", why="", rollback=""
    )
    ctx = GateContext(
        step=step,
        base_url=None,
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(prometheus_url="http://prom", metrics_timeout_s=0),
        client=httpx.Client(transport=httpx.MockTransport(handler)),
        sleep=lambda _s: None,
        clock=lambda: 0.0,
        recreated_engines={R2: "v2"},
        variant_label=label,
    )
    return ctx, queries


def test_prometheus_gate_queries_and_reads_the_plans_variant_label() -> None:
    ctx, queries = _prometheus_ctx("tier_variant", {"tier_variant": "v2"})
    gate_prometheus_variants(ctx)
    assert queries[-1].startswith("count by (container_name, tier_variant) ")
    assert ctx.notes == [f"prometheus: {R2} reports v2 (sglang:num_running_reqs)"]
    # Under the default label the same series has no variant: the gate would wrongly fail.
    wrong, _ = _prometheus_ctx("config_variant", {"tier_variant": "v2"})
    with pytest.raises(GateFailed, match="expected 'v2'"):
        gate_prometheus_variants(wrong)


def test_a_plan_made_before_variant_label_existed_reads_config_variant() -> None:
    ref = {"spec": "a", "path": "a", "sha256": "0" * 64}
    plan = Plan.model_validate(
        {"source": ref, "target": ref, "services": [], "steps": [], "untouched": []}
    )
    assert plan.variant_label == "config_variant"
