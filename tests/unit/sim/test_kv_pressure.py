"""Preemption (vLLM, recompute) and retraction (SGLang, retract_decode) under KV pressure.

A KV-starved replica must preempt or retract, recompute, and finish every request later
than a roomy one; a roomy replica never does. The laws hold for any workload: no request is
lost, every completed request has exactly its tokens, the pool is never overdrawn and is
empty at the end, and the preemption count is the sum of the requests' own.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.engines import profile_for
from tierctl.runtime.promtext import metric_total, parse_metrics
from tierctl.sim.config import EngineConfig
from tierctl.sim.engine import Scheduler, make_scheduler
from tierctl.sim.metrics import metrics_for
from tierctl.sim.sglang_retract import RetractingScheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT


def _sglang(pool: int, *extra: str) -> EngineConfig:
    return EngineConfig.from_argv(["--max-total-tokens", str(pool), *extra])


def _vllm(blocks: int, *extra: str) -> EngineConfig:
    return EngineConfig.from_argv(
        ["vllm", "serve", "m", "--num-gpu-blocks-override", str(blocks), "--max-num-seqs", "16",
         "--max-num-batched-tokens", "1024", "--max-model-len", "4096", *extra]
    )  # fmt: skip


def _long_outputs(n: int = 12) -> Workload:
    """Short prompts with long outputs, arriving together: decode grows the KV."""
    return Workload.of("long-out", [SimRequest(f"r{i}", 0.01 * i, 500, 800) for i in range(n)])


def _e2e(res: object) -> list[float]:
    return sorted(r.e2e_s for r in res.requests if r.e2e_s is not None)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("starved", "roomy"),
    [(_sglang(6_000), _sglang(100_000)), (_vllm(375), _vllm(6_250))],
    ids=["sglang-retract", "vllm-preempt"],
)
def test_a_starved_pool_preempts_and_recomputes_and_a_roomy_one_never_does(
    starved: EngineConfig, roomy: EngineConfig
) -> None:
    wl = _long_outputs()
    a = simulate(starved, wl, FLAT)
    b = simulate(roomy, wl, FLAT)
    assert b.summary.preemptions == 0
    assert a.summary.preemptions > 0
    # Nothing is lost: every request completes with all its tokens in both.
    for res in (a, b):
        assert res.summary.completion == 1.0
        assert all(r.output_tokens == 800 for r in res.requests)
    # The shape: preempted requests run their prompt and outputs again, so the starved
    # replica finishes later, and the preempted requests are among its slowest.
    assert max(_e2e(a)) > max(_e2e(b))
    assert sum(_e2e(a)) > sum(_e2e(b))
    hit = [r for r in a.requests if r.preemptions]
    spared = [r for r in a.requests if not r.preemptions]
    assert hit
    assert spared
    assert max(r.e2e_s or 0.0 for r in hit) >= min(r.e2e_s or 0.0 for r in spared)
    assert a.summary.preemptions == sum(r.preemptions for r in a.requests)


def test_sglang_retracts_the_request_with_fewest_outputs_then_the_longest_prompt() -> None:
    sched = RetractingScheduler(_sglang(2_000), FLAT)
    assert isinstance(make_scheduler(_sglang(2_000), FLAT), RetractingScheduler)
    for rid, inp in (("a", 300), ("b", 500), ("c", 400)):
        sched.submit(SimRequest(rid, 0.0, inp, 1_000), 0.0)
    now = 0.0
    while not sched.stats.preemptions:
        rnd = sched.step(now)
        assert rnd is not None
        now += rnd.duration_s
    # All three decoded for the same rounds: the longest prompt (b) goes first.
    assert [x.req.rid for x in sched.waiting] == ["b"]
    assert sched.new_token_ratio <= 1.0
    # The ratio was reset from the kept requests, (decoded + 20 each) / (max new + 1), before
    # the round decoded one more token each.
    kept = sched.running
    decoded = sum(x.generated - 1 for x in kept)
    expect = (decoded + 20 * len(kept)) / (1_000 * len(kept) + 1)
    assert sched.new_token_ratio == pytest.approx(min(1.0, expect))


def test_the_ratio_decays_while_decoding_goes_well_and_over_commits_admission() -> None:
    sched = RetractingScheduler(_sglang(1_000_000), FLAT)
    start = sched.new_token_ratio
    assert start == pytest.approx(0.7)
    sched.submit(SimRequest("a", 0.0, 100, 2_000), 0.0)
    now = 0.0
    for _ in range(700):
        rnd = sched.step(now)
        assert rnd is not None
        now += rnd.duration_s
    assert sched.new_token_ratio == pytest.approx(0.7 * 0.14)
    conservative = RetractingScheduler(
        _sglang(1_000_000, "--schedule-conservativeness", "0.5"), FLAT
    )
    assert conservative.new_token_ratio == pytest.approx(0.35)


def test_with_the_radix_cache_disabled_sglang_reserves_whole_outputs_and_never_retracts() -> None:
    cfg = _sglang(6_000, "--disable-radix-cache")
    sched = make_scheduler(cfg, FLAT)
    assert type(sched) is Scheduler
    res = simulate(cfg, _long_outputs(), FLAT)
    assert res.summary.preemptions == 0
    assert res.summary.completion == 1.0


rows_st = st.lists(
    st.tuples(st.floats(0, 5, allow_nan=False), st.integers(1, 1500), st.integers(1, 600)),
    min_size=1,
    max_size=16,
)


def _stepped(sched: Scheduler, wl: Workload, pool: int) -> None:
    now, i = 0.0, 0
    for _ in range(400_000):
        while i < len(wl.requests) and wl.requests[i].arrival_s <= now:
            sched.submit(wl.requests[i], now)
            i += 1
        rnd = sched.step(now)
        assert 0 <= sched.kv_used_tokens <= pool
        if rnd is None:
            if i == len(wl.requests):
                return
            now = wl.requests[i].arrival_s
            continue
        now += rnd.duration_s
    raise AssertionError("did not drain")


@settings(max_examples=40, deadline=None)
@given(rows_st, st.integers(1_600, 6_000), st.booleans())
def test_preemption_never_loses_a_request_and_conserves_tokens(
    rows: list[tuple[float, int, int]], pool: int, vllm: bool
) -> None:
    wl = Workload.of("h", [SimRequest(f"r{i}", t, a, b) for i, (t, a, b) in enumerate(rows)])
    cfg = _vllm(pool // 16) if vllm else _sglang(pool)
    sched = make_scheduler(cfg, FLAT)
    size = sched.kv_pool_tokens
    _stepped(sched, wl, size)
    by_rid = {x.req.rid: x for x in sched.done}
    assert set(by_rid) == {r.rid for r in wl.requests}  # none lost, none doubled
    assert len(sched.done) == len(wl.requests)
    for r in wl.requests:
        live = by_rid[r.rid]
        if live.status == "completed":
            assert live.generated == r.output_tokens
        else:
            assert live.status in ("rejected", "aborted")
            assert live.reason
    assert sched.kv_used_tokens == 0
    assert sched.stats.preemptions == sum(x.preemptions for x in sched.done)
    if sched.stats.preemptions:
        assert sched.stats.recomputed_tokens > 0


@settings(max_examples=25, deadline=None)
@given(rows_st, st.integers(1_600, 6_000))
def test_retraction_fast_forward_gives_the_stepped_results(
    rows: list[tuple[float, int, int]], pool: int
) -> None:
    wl = Workload.of("h", [SimRequest(f"r{i}", t, a, b) for i, (t, a, b) in enumerate(rows)])
    cost = dataclasses.replace(FLAT, decode_per_ctx_token_s=1e-7)
    a = simulate(_sglang(pool), wl, cost, fast_forward=True)
    b = simulate(_sglang(pool), wl, cost, fast_forward=False)
    assert a.summary.preemptions == b.summary.preemptions
    for x, y in zip(a.requests, b.requests, strict=True):
        assert (x.status, x.output_tokens, x.preemptions) == (
            y.status,
            y.output_tokens,
            y.preemptions,
        )
        assert (x.e2e_s is None) == (y.e2e_s is None)
        if x.e2e_s is not None:
            assert x.e2e_s == pytest.approx(y.e2e_s, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_engines_preemption_counter_carries_the_total_under_the_profiles_name(
    engine: str,
) -> None:
    kw = {"cache_info": {"block_size": "16"}} if engine == "vllm" else {}
    metrics = metrics_for(engine, "m", **kw)
    metrics.set_preemptions(3)
    metrics.set_preemptions(5)
    rules = profile_for(engine).sim_rules("0")
    name = profile_for(engine).prefix + rules.metrics_preemption
    assert metric_total(parse_metrics(metrics.render().decode()), name) == 5
