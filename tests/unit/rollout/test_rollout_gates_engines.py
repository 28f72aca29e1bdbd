"""Gates per engine: what a vLLM step is gated on, and metric-name drift named by the gates."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import httpx
import pytest

from tierctl.engines.vllm import format_non_default_args
from tierctl.errors import GateFailed
from tierctl.rollout.gates import (
    GATE_DEFS,
    GateContext,
    GateSettings,
    describe_gate,
    engine_gates,
    gate_metrics_variant,
    gate_names,
    gate_prometheus_variants,
    gate_running_args,
    gate_soak,
)
from tierctl.rollout.plan_schema import Step

SG = ["python3", "-m", "sglang.launch_server", "--port", "30001", "--tp-size", "4"]
VL = ["vllm", "serve", "/m", "--port", "8003", "--max-num-seqs", "512", "--max-model-len", "4096"]
MODELS = json.dumps({"data": [{"id": "/m", "max_model_len": 4096}]})


def _ctx(
    argv: list[str],
    routes: Callable[[httpx.Request], httpx.Response],
    logs: str | None = None,
    **settings: object,
) -> GateContext:
    step = Step(
        id="01",
        action="recreate",
        service="eng",
        role="engine",
        side="new",
        why="",
        rollback="",
        expected_argv=argv,
        container_name="eng",
        variant="v2",
    )
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    return GateContext(
        step=step,
        base_url="http://engine",
        new=None,  # type: ignore[arg-type]
        settings=GateSettings(**settings),  # type: ignore[arg-type]
        client=httpx.Client(transport=httpx.MockTransport(routes)),
        sleep=sleep,
        clock=lambda: now[0],
        logs=(lambda: logs) if logs is not None else None,
    )


def test_each_engine_has_its_argv_gate_and_one_definition_per_gate() -> None:
    assert engine_gates(SG) == ["health", "server-info", "metrics-variant", "soak"]
    assert engine_gates(VL) == ["health", "running-args", "metrics-variant", "soak"]
    assert gate_names() == (
        "health",
        "server-info",
        "running-args",
        "metrics-variant",
        "prometheus-variants",
        "soak",
    )
    step = Step(
        id="01", action="recreate", service="e", role="engine", side="new", why="", rollback="",
        expected_argv=VL,
    )  # fmt: skip
    text = describe_gate("running-args", step, None, "config_variant")
    assert "non-default args" in text
    assert "(--port --max-num-seqs --max-model-len)" in text
    assert GATE_DEFS["server-info"].run is GATE_DEFS["running-args"].run


def _vllm_routes(metrics: str = "") -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, text=MODELS)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=metrics)
        return httpx.Response(404)

    return handler


def test_vllm_running_args_from_the_startup_log() -> None:
    logged = {"model_tag": "/m", "port": 8003, "max_num_seqs": 512, "max_model_len": 4096}
    ctx = _ctx(VL, _vllm_routes(), logs="INFO " + format_non_default_args(logged))
    gate_running_args(ctx)
    assert ctx.notes == ["running-args: 4 flags match (startup log + /v1/models)"]
    wrong = _ctx(VL, _vllm_routes(), logs=format_non_default_args({**logged, "max_num_seqs": 256}))
    with pytest.raises(GateFailed, match="--max-num-seqs: rendered 512, engine parsed 256"):
        gate_running_args(wrong)


def test_vllm_running_args_without_a_log_names_what_it_could_not_see() -> None:
    ctx = _ctx(VL, _vllm_routes())
    gate_running_args(ctx)
    assert ctx.notes == [
        "running-args: 2 flags match (/v1/models); not visible to it: --port, --max-num-seqs"
    ]


def test_metrics_of_another_engine_are_named() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text='vllm:num_requests_running{engine="0"} 0\n')

    with pytest.raises(GateFailed) as err:
        gate_metrics_variant(_ctx(SG, handler))
    assert "has no sglang metrics (sglang:, sglang_; HTTP 200); it exports vllm: series" in str(
        err.value
    )


def test_soak_names_a_missing_counter_instead_of_no_traffic() -> None:
    text = 'vllm:e2e_request_latency_seconds_count{engine="0"} 40\n'
    ctx = _ctx(VL, _vllm_routes(text), soak_s=2, poll_interval_s=1)
    ctx.step = ctx.step.model_copy(update={"expected_argv": VL})
    gate_soak(_with_health(ctx, text))
    assert ctx.notes == [
        "soak: 2 s healthy; vllm:request_success_total is not in /metrics although "
        "vllm:e2e_request_latency_seconds_count is: error rate not judged"
    ]


def _with_health(ctx: GateContext, metrics: str) -> GateContext:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200)
        return httpx.Response(200, text=metrics)

    ctx.client = httpx.Client(transport=httpx.MockTransport(handler))
    return ctx


def test_prometheus_without_the_family_says_what_it_has() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        if query.startswith("count by (__name__)"):
            result = [{"metric": {"__name__": "vllm:num_requests_running"}, "value": [0, "1"]}]
        else:
            result = []
        return httpx.Response(200, json={"status": "success", "data": {"result": result}})

    collector = Step(
        id="02", action="recreate", service="col", role="collector", side="new", why="",
        rollback="",
    )  # fmt: skip
    ctx = _ctx(SG, handler, prometheus_url="http://prom", metrics_timeout_s=0)
    ctx.step = collector
    ctx.recreated_engines = {"eng": "v2"}
    with pytest.raises(GateFailed) as err:
        gate_prometheus_variants(ctx)
    assert (
        "Prometheus shows eng as no series, expected 'v2'; Prometheus has no "
        "sglang:num_running_reqs for eng but has vllm:num_requests_running"
    ) in str(err.value)


def test_vllm_running_args_accept_what_the_driver_changed_on_purpose_and_say_it() -> None:
    rendered = [*VL, "--host", "0.0.0.0"]
    logged = {
        "model_tag": "/m",
        "host": "127.0.0.1",
        "port": 8003,
        "max_num_seqs": 512,
        "max_model_len": 4096,
    }
    log = "INFO " + format_non_default_args(logged)
    # Without the driver's word, a loopback-bound engine is not what was rendered.
    with pytest.raises(
        GateFailed, match=r"--host: rendered 0\.0\.0\.0, engine parsed '127\.0\.0\.1'"
    ):
        gate_running_args(_ctx(rendered, _vllm_routes(), logs=log))
    ctx = _ctx(rendered, _vllm_routes(), logs=log)
    note = "local driver: bound --host 127.0.0.1 (the file says 0.0.0.0)"
    ctx.launched = lambda: ([*VL, "--host", "127.0.0.1"], (note,))
    gate_running_args(ctx)
    assert ctx.notes == [f"running-args: 5 flags match (startup log + /v1/models); {note}"]
    # Every other flag is still checked as rendered.
    ctx = _ctx(rendered, _vllm_routes(), logs=format_non_default_args({**logged, "port": 1}))
    ctx.launched = lambda: ([*VL, "--host", "127.0.0.1"], (note,))
    with pytest.raises(GateFailed, match="--port: rendered 8003"):
        gate_running_args(ctx)


@pytest.mark.parametrize(
    ("labelled", "scraped", "said"),
    [
        ("v2", "v2", "variant v2 (its labels and the collector's scrape config agree)"),
        ("v2", None, "variant v2 in its labels; not compared: the collector's scrape config"),
        (None, "v2", "variant not compared: the service has no config_variant label"),
        (None, None, "variant not checked: neither its labels nor a scrape config carry"),
    ],
)
def test_the_variant_note_says_what_was_compared_never_none(
    labelled: str | None, scraped: str | None, said: str
) -> None:
    """A fleet gate printed "variant None": that half of the check had compared nothing."""
    from dataclasses import replace

    from tierctl.rollout.deployment import Deployment
    from tierctl.rollout.normalise import CONFIGS_KEY
    from tierctl.rollout.source import SourceRef

    collector = {
        "image": "prom/prometheus",
        CONFIGS_KEY: {
            "scrape": {
                "content": {
                    "scrape_configs": [
                        {"static_configs": [{"labels": {"container_name": "eng",
                                                        "config_variant": scraped}}]}
                    ]
                }
            }
        },
    }  # fmt: skip
    services: dict[str, dict[str, object]] = {"eng": {"image": "e"}}
    if scraped is not None:
        services["prometheus"] = collector
    dep = Deployment("new", SourceRef(spec="n", path="n", sha256="0" * 64), "", services)

    def handler(_r: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="sglang:num_running_reqs 0\n")

    ctx = _ctx(SG, handler)
    ctx = replace(ctx, new=dep, step=ctx.step.model_copy(update={"variant": labelled}))
    gate_metrics_variant(ctx)
    assert said in ctx.notes[-1]
    assert "None" not in ctx.notes[-1]


def test_an_engine_whose_container_exited_fails_its_health_gate_at_once() -> None:
    """A crash on start or a refused flag (#37): the gate asks the driver whether the container
    still runs and fails on the first answer that it exited, with the code and the log's end,
    instead of waiting out the whole start-up budget."""
    from tierctl.rollout import gates as gates_module

    def refused(_r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    asked: list[float] = []
    ctx = _ctx(SG, refused, logs="line 1\nerror: unrecognized arguments: --no-such-flag\n",
               health_timeout_s=600)  # fmt: skip

    def state() -> tuple[str, int | None]:
        asked.append(ctx.clock())
        return ("running", None) if len(asked) < 3 else ("exited", 2)

    ctx.state = state
    with pytest.raises(GateFailed, match="exited before it answered /health") as info:
        gates_module.gate_health(ctx)
    assert "exit code 2" in info.value.message
    assert "unrecognized arguments: --no-such-flag" in info.value.message
    assert ctx.clock() < 10  # not the 600 s budget
    # Asked at most once per STATE_EVERY_S of the gate's clock, not at every poll.
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert all(g >= gates_module.STATE_EVERY_S for g in gaps), gaps


def test_a_running_container_keeps_the_whole_budget() -> None:
    from tierctl.rollout import gates as gates_module

    ctx = _ctx(SG, lambda _r: httpx.Response(503), health_timeout_s=30)
    ctx.state = lambda: ("running", None)
    with pytest.raises(GateFailed, match="did not answer /health in 30 s"):
        gates_module.gate_health(ctx)


def test_compose_ps_json_of_either_release_gives_the_state() -> None:
    from tierctl.rollout.drivers.docker import container_state_of

    lines = '{"Service":"r1","State":"running","ExitCode":0}\n{"Service":"r2","State":"exited","ExitCode":2}\n'
    assert container_state_of(lines, "r2") == ("exited", 2)
    array = '[{"Service":"r2","State":"running","ExitCode":0}]'
    assert container_state_of(array, "r2") == ("running", 0)
    assert container_state_of("not json\n", "r2") is None
    assert container_state_of(lines, "r3") is None
