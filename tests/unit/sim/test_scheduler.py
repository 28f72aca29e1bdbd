"""Scheduler invariants: queue limit, KV admission, prefix cache, determinism, fast-forward."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.engine import Scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload, generate, multi_turn_day

from .helpers import FLAT, cfg

requests_st = st.lists(
    st.tuples(
        st.floats(0, 20, allow_nan=False),
        st.integers(1, 6000),
        st.integers(1, 300),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=25,
)


def _wl(rows: list[tuple[float, int, int, int]]) -> Workload:
    # hash families give shared prefixes: family f's blocks are 1000*f + i
    reqs = [
        SimRequest(
            f"r{i}", t, inp, out, tuple(1000 * fam + j for j in range(inp // 512)) if fam else ()
        )
        for i, (t, inp, out, fam) in enumerate(rows)
    ]
    return Workload.of("h", reqs)


@settings(max_examples=40, deadline=None)
@given(requests_st, st.integers(0, 3), st.booleans())
def test_fast_forward_gives_the_same_results_as_stepping(
    rows: list[tuple[float, int, int, int]], n: int, mixed: bool
) -> None:
    argv = ["--prefill-decode-interval", str(n), "--max-total-tokens", "20000"]
    config = cfg(*argv, *(["--enable-mixed-chunk"] if mixed else []))
    cost = FLAT.__class__(**{**FLAT.__dict__, "decode_per_ctx_token_s": 1e-7})
    a = simulate(config, _wl(rows), cost, fast_forward=True)
    b = simulate(config, _wl(rows), cost, fast_forward=False)
    assert [r.status for r in a.requests] == [r.status for r in b.requests]
    for q in ("itl_p50_s", "itl_p99_s"):  # histogram quantiles agree to within one bucket
        assert getattr(a.summary, q) == pytest.approx(getattr(b.summary, q), rel=0.06)
    for x, y in zip(a.requests, b.requests, strict=True):
        assert x.output_tokens == y.output_tokens
        for f in ("ttft_s", "e2e_s", "tpot_s", "itl_max_s", "queue_s"):
            vx, vy = getattr(x, f), getattr(y, f)
            assert (vx is None) == (vy is None)
            if vx is not None:
                assert vx == pytest.approx(vy, rel=1e-9, abs=1e-9), (f, x.rid)


@settings(max_examples=40, deadline=None)
@given(requests_st, st.integers(0, 2))
def test_every_request_completes_with_its_tokens_and_kv_never_overflows(
    rows: list[tuple[float, int, int, int]], n: int
) -> None:
    sched = Scheduler(cfg("--prefill-decode-interval", str(n), "--max-total-tokens", "8000"), FLAT)
    wl = _wl(rows)
    now, i = 0.0, 0
    for _ in range(200_000):
        while i < len(wl.requests) and wl.requests[i].arrival_s <= now:
            sched.submit(wl.requests[i], now)
            i += 1
        rnd = sched.step(now)
        assert sched.kv_used_tokens <= sched.kv_pool_tokens
        if rnd is None:
            if i == len(wl.requests):
                break
            now = wl.requests[i].arrival_s
            continue
        now += rnd.duration_s
    by_rid = {x.req.rid: x for x in sched.done}
    for r in wl.requests:
        live = by_rid[r.rid]
        if r.input_tokens + r.output_tokens > 8000:
            assert live.status == "rejected"
        else:
            assert live.status == "completed"
            assert live.generated == r.output_tokens
    assert sched.kv_used_tokens == 0


def test_queue_limit_aborts_the_incoming_request() -> None:
    sched = Scheduler(cfg("--max-queued-requests", "2"), FLAT)
    outcomes = [sched.submit(SimRequest(f"r{i}", 0.0, 100, 10), 0.0) for i in range(4)]
    assert outcomes == ["queued", "queued", "queue_full", "queue_full"]
    assert [x.req.rid for x in sched.done] == ["r2", "r3"]


def test_admission_waits_for_kv_room_and_reports_it() -> None:
    wl = Workload.of("kv", [SimRequest(f"r{i}", 0.0, 3000, 500) for i in range(4)])
    res = simulate(cfg("--max-total-tokens", "7000"), wl, FLAT)
    assert res.summary.completion == 1.0
    # r0 and r1 (3500 tokens each with their outputs) fill the pool; r2 waits at the head
    # of the queue until both finish, and r3 behind it is admitted with it.
    assert res.summary.kv_waits == 1
    waited = [r for r in res.requests if r.kv_wait_s > 0]
    assert [r.rid for r in waited] == ["r2"]
    r2 = waited[0]
    r0 = next(r for r in res.requests if r.rid == "r0")
    assert r2.queue_s is not None
    assert r0.e2e_s is not None
    assert r2.queue_s >= r0.e2e_s


def test_prefix_cache_serves_multi_turn_prefixes_unless_disabled() -> None:
    wl = multi_turn_day(random.Random(3), hours=0.5, rate_per_h=200)
    on = simulate(cfg("--chunked-prefill-size", "16384"), wl)
    off = simulate(cfg("--chunked-prefill-size", "16384", "--disable-radix-cache"), wl)
    assert on.summary.cached_fraction > 0.5
    assert off.summary.cached_fraction == 0.0
    assert on.summary.ttft_p50_s is not None
    assert off.summary.ttft_p50_s is not None
    assert on.summary.ttft_p50_s < off.summary.ttft_p50_s


def test_same_seed_same_result_other_seed_other_result() -> None:
    a = simulate(
        cfg("--prefill-decode-interval", "1"), generate("both", 5, count=2, duration_s=60.0), FLAT
    )
    b = simulate(
        cfg("--prefill-decode-interval", "1"), generate("both", 5, count=2, duration_s=60.0), FLAT
    )
    c = simulate(
        cfg("--prefill-decode-interval", "1"), generate("both", 6, count=2, duration_s=60.0), FLAT
    )
    assert a.to_json() == b.to_json()
    assert a.to_json() != c.to_json()


def test_max_running_requests_caps_the_batch() -> None:
    wl = Workload.of("many", [SimRequest(f"r{i}", 0.0, 100, 50) for i in range(10)])
    sched = Scheduler(cfg("--max-running-requests", "4"), FLAT)
    for r in wl.requests:
        sched.submit(r, 0.0)
    peak = 0
    now = 0.0
    while (rnd := sched.step(now)) is not None:
        peak = max(peak, len(sched.running))
        now += rnd.duration_s
    assert peak == 4


def test_sglang_priority_scheduling_admits_higher_values_first_unless_told_otherwise() -> None:
    reqs = [SimRequest("low", 0.0, 900, 3, priority=1),
            SimRequest("high", 0.0, 900, 3, priority=5),
            SimRequest("mid", 0.0, 900, 3, priority=3)]  # fmt: skip

    def order(*flags: str) -> list[str]:
        res = simulate(cfg("--chunked-prefill-size", "1000", *flags), Workload.of("w", reqs), FLAT)
        return [r.rid for r in sorted(res.requests, key=lambda r: r.ttft_s or 0.0)]

    assert order() == ["low", "high", "mid"]  # FCFS
    assert order("--enable-priority-scheduling") == ["high", "mid", "low"]
    assert order("--enable-priority-scheduling", "--schedule-low-priority-values-first") == [
        "low",
        "mid",
        "high",
    ]
