"""Engine profiles: rendering, reading, verification and metric conventions per engine."""

from __future__ import annotations

import json

import pytest

from tierctl.catalog.store import load_catalog
from tierctl.engines import (
    PROFILES,
    SGLANG,
    VLLM,
    MetricRef,
    all_metric_prefixes,
    profile_for,
    profile_for_argv,
    profile_for_metrics,
    profile_for_prefix,
)
from tierctl.engines.vllm import format_non_default_args, parse_non_default_args
from tierctl.errors import InputError

VLLM_CAT = load_catalog("vllm", "0.33.0")


def fetcher(routes: dict[str, tuple[int, str]]):  # type: ignore[no-untyped-def]
    def fetch(path: str) -> tuple[int, str]:
        return routes.get(path, (404, "not found"))

    return fetch


# --- registry ---------------------------------------------------------------------------


def test_registry_knows_both_engines_and_refuses_others() -> None:
    assert profile_for("sglang") is SGLANG
    assert profile_for("vllm") is VLLM
    assert set(PROFILES) == {"sglang", "vllm"}
    with pytest.raises(InputError) as err:
        profile_for("trtllm")
    assert "sglang, vllm" in (err.value.fix or "")


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["python3", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["vllm", "serve", "m", "--max-num-seqs", "8"], "vllm"),
        (["/opt/venv/bin/vllm", "serve", "m"], "vllm"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["nginx", "-g", "daemon off;"], None),
        ([], None),
    ],
)
def test_profile_for_argv(argv: list[str], kind: str | None) -> None:
    found = profile_for_argv(argv)
    assert (found.kind if found else None) == kind


def test_metric_prefixes_are_per_engine() -> None:
    assert all_metric_prefixes() == ("sglang:", "sglang_", "vllm:", "vllm_")
    assert profile_for_prefix("vllm:") is VLLM
    assert profile_for_prefix("sglang_") is SGLANG
    assert profile_for_prefix("trt:") is None
    assert profile_for_metrics({"vllm_request_success_total"}) is VLLM
    assert VLLM.detect_prefix({"vllm_request_success_total"}) == "vllm_"
    assert SGLANG.detect_prefix({"sglang:num_running_reqs"}) == "sglang:"
    assert SGLANG.detect_prefix({"vllm:num_requests_running"}) is None


# --- rendering ----------------------------------------------------------------------------


def test_vllm_false_renders_no_form_for_boolean_optional() -> None:
    assert VLLM.flag_tokens("enable-prefix-caching", False) == ["--no-enable-prefix-caching"]
    flag = VLLM_CAT.lookup("--enable-prefix-caching")
    assert VLLM.flag_tokens("enable-prefix-caching", False, flag) == ["--no-enable-prefix-caching"]
    # A store_true flag has no --no- form: false leaves it out.
    store_true = VLLM_CAT.lookup("--headless")
    assert store_true is not None
    assert store_true.action == "store_true"
    assert VLLM.flag_tokens("headless", False, store_true) == []


def test_sglang_false_is_omitted_unless_the_catalog_says_boolean_optional() -> None:
    assert SGLANG.flag_tokens("enable-metrics", False) == []
    cat = load_catalog("sglang", "0.5.23")
    optional = next(f for f in cat.flags.values() if f.action == "boolean_optional")
    name = optional.name[2:]
    assert SGLANG.flag_tokens(name, False, optional) == [f"--no-{name}"]


def test_value_shapes_render_the_same_for_every_engine() -> None:
    for profile in PROFILES.values():
        assert profile.flag_tokens("x", True) == ["--x"]
        assert profile.flag_tokens("x", 16384) == ["--x", "16384"]
        assert profile.flag_tokens("x", [1, "a"]) == ["--x", "1", "a"]
        assert profile.flag_tokens("x", {"json": {"a": 1}}) == ["--x", '{"a":1}']
        assert profile.flag_tokens("x", {"repeat": ["a", "b"]}) == ["--x", "a", "--x", "b"]


def test_vllm_model_is_positional_for_vllm_serve_only() -> None:
    flags = {"model": "/models/llama", "tensor-parallel-size": 8, "enable-prefix-caching": False}
    assert VLLM.render_argv(("vllm", "serve"), flags, VLLM_CAT) == [
        "vllm",
        "serve",
        "/models/llama",
        "--tensor-parallel-size",
        "8",
        "--no-enable-prefix-caching",
    ]
    module = ("python3", "-m", "vllm.entrypoints.openai.api_server")
    assert VLLM.render_argv(module, flags, VLLM_CAT)[3:5] == ["--model", "/models/llama"]


def test_vllm_command_reads_back_into_the_spec_flags() -> None:
    argv = ["vllm", "serve", "/models/llama", "--max-num-seqs", "256", "--no-enable-prefix-caching"]
    cmd = VLLM.split_command(argv)
    assert cmd.launcher == ("vllm", "serve")
    assert cmd.positional == {"model": "/models/llama"}
    assert VLLM.command_flags(argv, VLLM_CAT) == {
        "model": "/models/llama",
        "max-num-seqs": "256",
        "no-enable-prefix-caching": True,
    }


# --- metrics ------------------------------------------------------------------------------


def test_vllm_aborts_are_a_labelled_counter() -> None:
    samples = [
        ("vllm:request_success_total", {"finished_reason": "stop"}, 7.0),
        ("vllm:request_success_total", {"finished_reason": "length"}, 2.0),
        ("vllm:request_success_total", {"finished_reason": "abort"}, 1.0),
    ]
    assert VLLM.sample_total(samples, VLLM.metrics.finished) == 9.0
    assert VLLM.sample_total(samples, VLLM.metrics.aborted) == 1.0
    assert VLLM.sample_total(samples, MetricRef("num_requests_running")) is None


def test_selectors_carry_prefix_and_matchers() -> None:
    assert VLLM.selector(VLLM.metrics.aborted, "vllm_", 'container_name="a"') == (
        '{__name__="vllm_request_success_total",finished_reason="abort",container_name="a"}'
    )
    assert SGLANG.variants_query("config_variant", 'host_machine="gpu02"') == (
        'count by (container_name, config_variant) (sglang:num_running_reqs{host_machine="gpu02"})'
    )
    assert VLLM.variants_query("v", 'container_name="a"', "vllm_") == (
        'count by (container_name, v) (vllm_num_requests_running{container_name="a"})'
    )
    # The prefix a Prometheus holds: detected from its names, else the exported one.
    assert VLLM.series_prefix({"vllm_num_requests_running"}) == "vllm_"
    assert VLLM.series_prefix({"vllm:num_requests_running"}) == "vllm:"
    assert SGLANG.series_prefix(set()) == "sglang:"


def test_fatal_log_patterns() -> None:
    log = "INFO ok\ntorch.OutOfMemoryError: CUDA out of memory.\nvllm.v1.engine.exceptions.EngineDeadError: x\n"
    assert [name for name, _ in VLLM.fatal_lines(log)] == ["cuda-oom", "engine-dead"]
    assert [n for n, _ in SGLANG.fatal_lines("Scheduler watchdog timeout (x=1)")] == ["watchdog"]


# --- running argv -------------------------------------------------------------------------

SG_ARGV = ["python3", "-m", "sglang.launch_server", "--tp-size", "4", "--enable-metrics"]


def test_sglang_verifies_through_server_info_and_its_alias() -> None:
    body = json.dumps({"tp_size": 4, "enable_metrics": True})
    ok = SGLANG.verify_running_args(SG_ARGV, fetcher({"/get_server_info": (200, body)}))
    assert ok.ok
    assert ok.verified == ("tp-size", "enable-metrics")
    bad = SGLANG.verify_running_args(
        SG_ARGV, fetcher({"/server_info": (200, json.dumps({"tp_size": 2}))})
    )
    assert bad.mismatches == (
        "--tp-size: rendered 4, engine reports 2",
        "--enable-metrics: rendered (set), not reported",
    )
    down = SGLANG.verify_running_args(SG_ARGV, fetcher({"/server_info": (500, "")}))
    assert down.error == "/server_info answered HTTP 500"


V_ARGV = [
    "vllm",
    "serve",
    "/models/llama",
    "--max-num-seqs",
    "512",
    "--max-model-len",
    "32768",
    "--gpu-memory-utilization",
    "0.9",
    "--no-enable-prefix-caching",
]
V_LOGGED = {
    "model_tag": "/models/llama",
    "model": "/models/llama",
    "max_num_seqs": 512,
    "max_model_len": 32768,
    "gpu_memory_utilization": 0.9,
    "enable_prefix_caching": False,
}
MODELS = json.dumps({"data": [{"id": "/models/llama", "max_model_len": 32768}]})
METRICS = (
    'vllm:cache_config_info{block_size="16",enable_prefix_caching="False",'
    'gpu_memory_utilization="0.9",engine="0"} 1.0\n'
)


def test_vllm_verifies_from_the_startup_log_and_http() -> None:
    log = "INFO 12-01 [utils.py:1] " + format_non_default_args(V_LOGGED) + "\nINFO started\n"
    routes = fetcher({"/v1/models": (200, MODELS), "/metrics": (200, METRICS)})
    check = VLLM.verify_running_args(V_ARGV, routes, log, VLLM_CAT)
    assert check.ok, check
    assert check.method == "startup log + /v1/models + vllm:cache_config_info"
    assert set(check.verified) == {
        "model",
        "max-num-seqs",
        "max-model-len",
        "gpu-memory-utilization",
        "no-enable-prefix-caching",
    }
    assert check.unverifiable == ()


def test_vllm_names_a_flag_the_engine_parsed_differently() -> None:
    log = format_non_default_args({**V_LOGGED, "max_num_seqs": 256})
    routes = fetcher({"/v1/models": (200, MODELS), "/metrics": (200, METRICS)})
    check = VLLM.verify_running_args(V_ARGV, routes, log, VLLM_CAT)
    assert check.mismatches == ("--max-num-seqs: rendered 512, engine parsed 256",)
    missing = {k: v for k, v in V_LOGGED.items() if k != "max_num_seqs"}
    check = VLLM.verify_running_args(V_ARGV, routes, format_non_default_args(missing), VLLM_CAT)
    assert check.mismatches == (
        "--max-num-seqs: rendered 512, not among the engine's non-default args",
    )


def test_vllm_without_a_log_verifies_what_http_shows_and_names_the_rest() -> None:
    metrics = METRICS.replace('enable_prefix_caching="False"', 'enable_prefix_caching="True"')
    routes = fetcher({"/v1/models": (200, MODELS), "/metrics": (200, metrics)})
    check = VLLM.verify_running_args(V_ARGV, routes, None, VLLM_CAT)
    assert check.mismatches == (
        "--no-enable-prefix-caching: engine reports enable_prefix_caching='True', "
        "rendered means False",
    )
    assert check.unverifiable == ("max-num-seqs",)
    assert "startup log" not in check.method


def test_non_default_args_takes_the_last_start() -> None:
    text = format_non_default_args({"a": 1}) + "\nnoise\n" + format_non_default_args({"a": 2})
    assert parse_non_default_args(text) == {"a": 2}
    assert parse_non_default_args("no such line") is None


def test_the_catalog_types_know_exactly_the_profiled_engines() -> None:
    """The leaf's kinds (validating a catalog's engine) are the registry's, in order: filled
    from PROFILES, written nowhere else."""
    from tierctl.engine_catalog import engine_kinds

    assert tuple(PROFILES) == engine_kinds()


def test_a_loaded_catalog_reads_underscores_as_its_engines_parser_does() -> None:
    """The shipped files leave ``underscores`` open; loading tells the catalog the profile's."""
    for kind, version in (("vllm", "0.33.0"), ("sglang", "0.5.23")):
        catalog = load_catalog(kind, version)
        assert catalog.underscores is None
        mapped = catalog.lookup("--max_running_requests" if kind == "sglang" else "--max_num_seqs")
        assert (mapped is not None) == profile_for(kind).flag_underscores
