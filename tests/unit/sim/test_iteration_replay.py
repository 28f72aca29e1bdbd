"""Replaying a vLLM iteration log against the requests it served (fitting's step shapes).

The logs here are written by the simulator's own vLLM scheduler (its rounds, in the log's
terms), so the truth is known: which chunks each step held, where in its prompt each started
and how many context tokens its decoders attended to.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Round
from tierctl.sim.fitting import (
    IterationSample,
    MeasuredRequest,
    fit_iterations,
    fit_overheads,
    iteration_residuals,
    iteration_shapes,
    replay_iterations,
)
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

BUDGET = 512
CONFIG = EngineConfig.from_argv(
    ["vllm", "serve", "m", "--max-num-seqs", "8", "--max-num-batched-tokens", str(BUDGET),
     "--num-gpu-blocks-override", "65536"]
)  # fmt: skip
TRUTH = dataclasses.replace(
    FLAT, prefill_base_s=0.011, prefill_per_token_s=9e-5, prefill_attn_pair_s=1.4e-7,
    decode_base_s=0.005, decode_per_seq_s=4e-4, decode_per_ctx_token_s=1.2e-6,
    round_overhead_s=0.0, kv_pool_tokens=1_000_000,
)  # fmt: skip


def _logged(cost: CostModel, r: Round) -> IterationSample:
    """One simulated round as vLLM logs it: counts and the model's time."""
    decoders = r.batch_size - len(r.chunks)
    if r.chunks:
        t = cost.prefill_s(r.chunks) + cost.decode_marginal_s(decoders, r.context_tokens)
    else:
        t = cost.decode_s(decoders, r.context_tokens)
    return IterationSample(len(r.chunks), sum(c for c, _ in r.chunks), decoders, t)


def _run(
    seed: int, count: int = 30
) -> tuple[list[Round], list[IterationSample], list[MeasuredRequest]]:
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(count):
        reqs.append(SimRequest(f"r{i}", t, rng.randint(20, 2500), rng.randint(2, 120)))
        t += rng.expovariate(3.0)
    rounds: list[Round] = []
    simulate(CONFIG, Workload.of("w", reqs), TRUTH, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    measured = [MeasuredRequest(r.arrival_s, r.input_tokens, r.output_tokens, 0.0, None, ())
                for r in reqs]  # fmt: skip
    return rounds, [_logged(TRUTH, r) for r in rounds], measured


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_the_replay_rebuilds_every_steps_chunks_and_decode_context(seed: int) -> None:
    rounds, its, reqs = _run(seed)
    shapes, bad = replay_iterations(its, reqs, BUDGET)
    assert bad == 0
    for r, sh in zip(rounds, shapes, strict=True):
        assert sh.chunks == r.chunks
        assert sh.decoders == r.batch_size - len(r.chunks)
        assert sh.decode_context_tokens == r.context_tokens


def test_a_fit_with_the_requests_recovers_the_context_term_the_counts_alone_cannot() -> None:
    _, its, reqs = _run(3, count=40)
    model = fit_iterations(its, FLAT, name="t", budget_tokens=BUDGET, requests=reqs)
    for f in ("prefill_base_s", "prefill_per_token_s", "prefill_attn_pair_s",
              "decode_base_s", "decode_per_seq_s", "decode_per_ctx_token_s"):  # fmt: skip
        assert getattr(model, f) == pytest.approx(getattr(TRUTH, f), rel=0.02), f
    res = iteration_residuals(model, its, BUDGET, reqs)
    assert res["decode_mean_abs_rel_error"] < 1e-6
    assert res["prefill_mean_abs_rel_error"] < 1e-6
    blind = fit_iterations(its, FLAT, name="t", budget_tokens=BUDGET)
    assert blind.decode_per_ctx_token_s == 0.0
    assert iteration_residuals(blind, its, BUDGET)["decode_mean_abs_rel_error"] > 0.05


def test_two_requests_the_server_handed_on_in_the_other_order_are_matched() -> None:
    # A 100- and a 300-token prompt sent 1 ms apart; the engine admitted the second first.
    reqs = [MeasuredRequest(0.0, 100, 3, 0.0, None, ()),
            MeasuredRequest(0.001, 300, 2, 0.0, None, ())]  # fmt: skip
    its = [IterationSample(1, 300, 0, 0.03), IterationSample(1, 100, 1, 0.02),
           IterationSample(0, 0, 1, 0.005), IterationSample(0, 0, 1, 0.005)]  # fmt: skip
    shapes, bad = replay_iterations(its, reqs, BUDGET)
    assert bad == 0
    assert [sh.decode_context_tokens for sh in shapes] == [0, 301, 101, 102]


def test_a_prefix_cache_hit_starts_the_chunk_after_the_cached_part() -> None:
    # 160 of a 200-token prompt were cached: the step computed 40, attending to 160 before.
    reqs = [MeasuredRequest(0.0, 200, 2, 0.0, None, ())]
    its = [IterationSample(1, 40, 0, 0.02), IterationSample(0, 0, 1, 0.005)]
    shapes, bad = replay_iterations(its, reqs, BUDGET)
    assert bad == 0
    assert shapes[0].chunks == ((40, 160),)
    assert shapes[1].decode_context_tokens == 201


def test_a_log_with_other_traffic_falls_back_to_the_budget_rebuild() -> None:
    _, its, reqs = _run(5)
    # Half the requests missing: the replay cannot explain the log.
    shapes = iteration_shapes(its, BUDGET, reqs[: len(reqs) // 2])
    assert all(sh.decode_context_tokens == 0 for sh in shapes)
    _, bad = replay_iterations(its, reqs[: len(reqs) // 2], BUDGET)
    assert bad * 20 > len(its)


def test_the_detokenize_term_is_charged_per_streamed_token() -> None:
    m = dataclasses.replace(TRUTH, detokenize_per_token_s=1e-4)
    assert m.decode_s(4, 1000) - TRUTH.decode_s(4, 1000) == pytest.approx(4e-4)
    assert m.decode_marginal_s(3, 0) - TRUTH.decode_marginal_s(3, 0) == pytest.approx(3e-4)
    # The step log's elapsed time excludes it: residuals against a log ignore it.
    _, its, reqs = _run(7)
    fitted = fit_iterations(its, FLAT, name="t", budget_tokens=BUDGET, requests=reqs)
    with_detok = dataclasses.replace(fitted, detokenize_per_token_s=1e-3)
    assert iteration_residuals(with_detok, its, BUDGET, reqs) == iteration_residuals(
        fitted, its, BUDGET, reqs
    )


def test_the_time_between_steps_and_per_request_are_measured_from_the_log_and_timings() -> None:
    # A run of the simulator with known host terms, logged the way vLLM logs it (the model's
    # time only) and timed the way the client sees it (every token at its step's end).
    truth = dataclasses.replace(
        TRUTH, round_overhead_s=0.0015, detokenize_per_token_s=2e-4, request_overhead_s=0.006
    )
    rng = random.Random(11)
    t, reqs = 0.0, []
    for i in range(40):
        reqs.append(SimRequest(f"r{i}", t, rng.randint(20, 1500), rng.randint(2, 80)))
        t += rng.expovariate(2.0)
    rounds: list[Round] = []
    simulate(CONFIG, Workload.of("w", reqs), truth, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    bare = dataclasses.replace(truth, round_overhead_s=0.0, detokenize_per_token_s=0.0)
    its = [_logged(bare, r) for r in rounds]
    stamps: dict[str, list[float]] = {}
    for r in rounds:
        for em in r.emitted:
            stamps.setdefault(em.rid, []).append(r.start_s + r.duration_s)
    measured = []
    for q in reqs:
        ts = stamps[q.rid]
        gaps = tuple(b - a for a, b in itertools.pairwise(ts))
        measured.append(MeasuredRequest(q.arrival_s, q.input_tokens, q.output_tokens,
                                        ts[0] - q.arrival_s, None, gaps))  # fmt: skip
    steps = fit_iterations(its, FLAT, name="t", budget_tokens=BUDGET, requests=measured)
    fitted, res = fit_overheads(steps, measured, CONFIG, iterations=its, budget_tokens=BUDGET)
    assert "measured" in res["between_steps"]
    assert fitted.round_overhead_s == pytest.approx(0.0015, rel=0.1)
    assert fitted.detokenize_per_token_s == pytest.approx(2e-4, rel=0.15)
    assert fitted.request_overhead_s == pytest.approx(0.006, rel=0.1)
