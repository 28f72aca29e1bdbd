"""Host-side costs: tokenization on the event loop delays requests and health probes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tierctl.sim.cost import GLM53_FLASH_W4AFP8_TP4_H200_HOST
from tierctl.sim.host import plan_host, probe_latencies
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT, cfg

HOST = dataclasses.replace(
    FLAT, request_overhead_s=0.0, tokenize_per_byte_s=1e-6, bytes_per_token=4.0
)


def two_big() -> tuple[SimRequest, ...]:
    # 1M tokens x 4 bytes x 1 us = 4 s of tokenization each
    return (SimRequest("a", 0.0, 1_000_000, 2), SimRequest("b", 1.0, 1_000_000, 2))


def test_on_the_loop_prompts_tokenize_one_after_another_and_block_probes() -> None:
    plan = plan_host(two_big(), HOST, on_loop=True)
    assert plan.ready_s == (4.0, 8.0)
    assert plan.busy == ((0.0, 8.0),)
    assert probe_latencies(plan, 10.0, 2.0, 0.0) == [8.0, 6.0, 4.0, 2.0, 0.0, 0.0]


def test_with_the_batch_tokenizer_thread_the_loop_stays_free() -> None:
    plan = plan_host(two_big(), HOST, on_loop=False)
    assert plan.ready_s == (4.0, 8.0)  # still one prompt after another, on the worker
    assert probe_latencies(plan, 10.0, 2.0, 0.0) == [0.0] * 6


def test_ttft_counts_from_arrival_including_tokenization() -> None:
    wl = Workload.of("one", [SimRequest("a", 1.0, 1000, 2)])
    res = simulate(cfg(), wl, dataclasses.replace(FLAT, tokenize_per_byte_s=1e-4))
    r = res.requests[0]
    assert r.arrival_s == 1.0
    # 4000 bytes x 1e-4 = 0.4 s on the loop, then one 1000-token chunk of 0.1 s
    assert abs((r.ttft_s or 0) - 0.5) < 1e-9


def test_the_ingestion_incident_misses_probes_only_without_the_dynamic_batch_tokenizer(
    run_cli: Callable[..., Any],
) -> None:
    from tierctl.sim.workload import generate

    wl = generate("ingestion", seed=0, duration_s=600.0 + 1)  # 10 minutes
    base = ["--chunked-prefill-size", "16384"]
    on_loop = simulate(cfg(*base), wl, GLM53_FLASH_W4AFP8_TP4_H200_HOST).summary
    thread = simulate(cfg(*base, "--enable-dynamic-batch-tokenizer"), wl,
                      GLM53_FLASH_W4AFP8_TP4_H200_HOST).summary  # fmt: skip
    assert on_loop.probe_misses > 10
    assert on_loop.unhealthy_flips >= 2
    assert on_loop.probe_max_s is not None
    assert on_loop.probe_max_s > 30  # ten 1.5 MB prompts in a cluster: ~35 s of loop time
    assert thread.probe_misses == 0
    assert thread.unhealthy_flips == 0
    res = run_cli("sim", "run", "--workload", "ingestion", "--duration-s", "300", "--preset",
                  "glm53-flash-w4afp8-tp4-h200-host", "--", *base)  # fmt: skip
    assert res.code == 0, res.err
    assert "unhealthy flips" in res.out
