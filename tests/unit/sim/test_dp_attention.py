"""SGLang DP attention: per-rank schedulers, one global step, the interval armed globally."""

from __future__ import annotations

import math

from tierctl.sim.config import EngineConfig
from tierctl.sim.dp_attention import DpAttentionScheduler
from tierctl.sim.simulate import MAX_STEPS, _run, simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

DP2 = ("--enable-dp-attention", "--dp-size", "2")


def _cfg(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["--chunked-prefill-size", "1000", *flags])


# Round robin: long -> rank 0, dec -> rank 1.
REQS = [SimRequest("long", 0.0, 10_000, 2), SimRequest("dec", 0.0, 100, 200)]


def test_requests_are_dispatched_round_robin_and_a_decoding_rank_waits_for_the_chunk() -> None:
    res = simulate(_cfg(*DP2), Workload.of("w", REQS), FLAT)
    by = {r.rid: r for r in res.requests}
    # dec has its own rank: prefilled at once instead of after long's 10 chunks ...
    assert by["dec"].ttft_s is not None
    assert by["dec"].ttft_s < 0.05
    # ... but each of its steps lasts as long as rank 0's 0.1 s chunk (the MoE barrier).
    assert by["dec"].itl_max_s is not None
    assert abs(by["dec"].itl_max_s - 0.1) < 1e-9
    alone = simulate(_cfg(), Workload.of("w", REQS), FLAT)
    assert {r.rid: r for r in alone.requests}["dec"].ttft_s > 1.0  # one rank: behind long


def test_the_interval_is_armed_on_every_rank_by_any_ranks_extend() -> None:
    # A request reaching rank 1 while rank 0 prefills waits out the countdown rank 0's chunks
    # arm globally (is_extend_in_batch under DP attention), not just rank 1's own.
    reqs = [*REQS, SimRequest("fill", 0.0, 50, 2), SimRequest("late", 0.305, 100, 3)]

    def late_ttft(global_interval: bool) -> float:
        sched = DpAttentionScheduler(_cfg(*DP2, "--prefill-decode-interval", "4"), FLAT)
        sched.global_interval = global_interval
        _run(sched, tuple(reqs), FLAT, math.inf, True, None, None, MAX_STEPS)
        late = next(x for x in sched.done if x.req.rid == "late")
        assert late.first_token_s is not None
        return late.first_token_s - late.enqueued_s

    assert late_ttft(True) > late_ttft(False) + 0.02


def test_one_rank_is_the_plain_scheduler() -> None:
    wl = Workload.of("w", REQS)
    a = simulate(_cfg("--enable-dp-attention", "--dp-size", "1"), wl, FLAT)
    b = simulate(_cfg(), wl, FLAT)
    assert [r.e2e_s for r in a.requests] == [r.e2e_s for r in b.requests]
