"""The server-info comparison and the rendered scrape labels the gates rely on."""

from __future__ import annotations

from pathlib import Path

from rollout_examples import R1, R2, render_variant

from tierctl.rollout.deployment import Deployment
from tierctl.rollout.gates import scrape_variants, server_info_mismatches
from tierctl.rollout.model import SourceRef
from tierctl.rollout.normalise import load_services
from tierctl.rollout.scrape import metric_total, parse_metrics

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


def test_scrape_variants_come_from_the_rendered_collector_config(tmp_path: Path) -> None:
    text = render_variant(tmp_path, "new").read_text()
    dep = Deployment(
        "new",
        SourceRef(spec="n", path="n", sha256="0" * 64),
        text,
        load_services(text, "n").services,
    )
    variants = scrape_variants(dep)
    assert variants[R1].endswith("dyntok-pdi1-h200-tp4")
    assert variants[R2].endswith("dyntok-pdi2-h200-tp4")


def test_metric_totals_accept_both_spellings() -> None:
    samples = parse_metrics(
        '# HELP x\nsglang:num_aborted_requests_total{model_name="m"} 2\n'
        'sglang_num_aborted_requests_total{model_name="n"} 1\nother 5\n'
    )
    assert metric_total(samples, "sglang:num_aborted_requests_total") == 3
    assert metric_total(samples, "sglang:e2e_request_latency_seconds_count") is None
