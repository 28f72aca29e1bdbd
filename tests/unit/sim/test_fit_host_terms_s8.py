"""The cost terms and fit statistics the held-out what-if check (benchmarks/sim_whatif.py,
session 8) showed missing or biased: a prefill chunk's read of its cached context, slow
stretches (the run-to-run noise one real run carries), the median step (log least squares),
the per-request host time of requests that found the engine idle, and the speculative
round's draft and verify cost. Each test fails when its term is dropped.

Logs are written by the simulator's own vLLM scheduler, so the truth is known.
"""

from __future__ import annotations

import dataclasses
import random
import statistics

import pytest

from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Round
from tierctl.sim.iteration_fit import (
    IterationSample,
    _request_host_time,
    fit_iteration_runs,
    fit_iterations,
    fit_spec_step_cost,
    iteration_shapes,
    replay_iterations,
    slow_stretches,
)
from tierctl.sim.simulate import simulate
from tierctl.sim.uncertainty import what_if
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT, LOG_BUDGET, LOG_CONFIG, LOG_TRUTH, logged_run


def _run(
    truth: CostModel, seed: int, config: EngineConfig = LOG_CONFIG, count: int = 40
) -> tuple[list[Round], list[IterationSample], list[MeasuredRequest]]:
    return logged_run(truth, seed, config, count)


# -- a prefill chunk's read of its cached context -----------------------------------------


def test_a_chunk_deep_in_its_prompt_pays_the_context_read_once_per_chunk() -> None:
    model = dataclasses.replace(LOG_TRUTH, prefill_per_ctx_token_s=2e-6)
    assert model.prefill_s([(128, 2600)]) - LOG_TRUTH.prefill_s([(128, 2600)]) == pytest.approx(
        2e-6 * 2600
    )
    # The same 512 tokens at the same depth in 4 chunks read the context 4 times.
    one = model.prefill_s([(512, 2048)]) - LOG_TRUTH.prefill_s([(512, 2048)])
    four = sum(
        model.prefill_s([(128, 2048 + 128 * i)]) - LOG_TRUTH.prefill_s([(128, 2048 + 128 * i)])
        for i in range(4)
    )
    assert four > 4 * one * 0.99


def test_the_context_read_is_fitted_from_chunks_of_several_sizes_at_depth() -> None:
    truth = dataclasses.replace(LOG_TRUTH, prefill_per_ctx_token_s=3e-6)
    # Budget 512 with decoders riding along: chunks of every size, deep in their prompts.
    _, its, reqs = _run(truth, 1)
    assert replay_iterations(its, reqs, LOG_BUDGET)[1] == 0
    model = fit_iteration_runs([(its, LOG_BUDGET, reqs)], FLAT, name="t")
    assert model.prefill_per_ctx_token_s == pytest.approx(3e-6, rel=0.05)
    assert model.prefill_attn_pair_s == pytest.approx(truth.prefill_attn_pair_s, rel=0.05)


# -- slow stretches -----------------------------------------------------------------------


def test_slow_stretches_are_the_block_means_spread_beyond_independent_noise() -> None:
    rng = random.Random(5)
    iid = [rng.gauss(0, 0.3) for _ in range(2500)]
    assert slow_stretches(iid, 25)[0] < 0.05
    drift = []
    for _ in range(100):
        z = rng.gauss(0, 0.4)
        drift += [z + rng.gauss(0, 0.3) for _ in range(25)]
    sigma, block = slow_stretches(drift, 25)
    assert block == 25
    assert sigma == pytest.approx(0.4, rel=0.25)
    assert slow_stretches(drift[:60], 25) == (0.0, 0)  # too few blocks to tell


def test_a_fit_of_a_drifting_log_sets_the_slow_stretches() -> None:
    _, its, reqs = _run(LOG_TRUTH, 3, count=60)
    rng = random.Random(9)
    drifting = []
    for i, s in enumerate(its):
        if i % 20 == 0:
            z = rng.gauss(0, 0.5)
        drifting.append(dataclasses.replace(s, elapsed_s=s.elapsed_s * 2.718281828**z))
    steady = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=reqs)
    assert steady.step_jitter_slow == 0.0
    model = fit_iterations(drifting, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=reqs)
    assert model.step_jitter_slow > 0.25
    assert model.step_jitter_block > 1


def test_slow_stretches_widen_the_simulated_aa_floor_beyond_per_step_jitter() -> None:
    reqs = [SimRequest(f"r{i}", 0.2 * i, 300 + 50 * i, 40) for i in range(12)]
    wl = Workload.of("w", reqs)
    iid = dataclasses.replace(LOG_TRUTH, step_jitter=0.2)
    slow = dataclasses.replace(iid, step_jitter_slow=0.3, step_jitter_block=20)
    a = what_if(LOG_CONFIG, LOG_CONFIG, wl, iid, draws=16)
    b = what_if(LOG_CONFIG, LOG_CONFIG, wl, slow, draws=16)
    tpot_a = next(r for r in a.rows if r.metric == "TPOT p50")
    tpot_b = next(r for r in b.rows if r.metric == "TPOT p50")
    assert tpot_b.floor > 2 * tpot_a.floor
    assert tpot_b.high is not None
    assert tpot_a.high is not None
    assert tpot_b.high > tpot_a.high


def test_without_slow_stretches_the_per_step_draws_are_unchanged() -> None:
    reqs = [SimRequest(f"r{i}", 0.1 * i, 200, 20) for i in range(6)]
    wl = Workload.of("w", reqs)
    m = dataclasses.replace(LOG_TRUTH, step_jitter=0.2)
    one = simulate(LOG_CONFIG, wl, m, seed=4).summary
    two = simulate(LOG_CONFIG, wl, dataclasses.replace(m, step_jitter_block=30), seed=4).summary
    assert one == two


# -- the median step: least squares of the log ratios -------------------------------------


def test_a_noisy_log_is_fitted_at_its_median_step_not_below_it() -> None:
    _, its, reqs = _run(LOG_TRUTH, 7, count=60)
    rng = random.Random(3)
    noisy = [dataclasses.replace(s, elapsed_s=s.elapsed_s * 2.718281828 ** rng.gauss(0, 0.6))
             for s in its]  # fmt: skip
    model = fit_iterations(noisy, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=reqs)
    # The model's step against the true one, over the run's steps: a relative least
    # squares (weights 1 / logged time) puts them at ~0.6-0.8x.
    shapes = iteration_shapes(its, LOG_BUDGET, reqs)
    ratios = sorted(
        (
            model.prefill_s(sh.chunks)
            if sh.chunks
            else model.decode_s(sh.decoders, sh.decode_context_tokens)
        )
        / s.elapsed_s
        for sh, s in zip(shapes, its, strict=True)
        if not sh.chunks or not sh.decoders
    )
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.08)
    assert model.step_jitter == pytest.approx(0.6, rel=0.2)


# -- the per-request host time of requests that found the engine idle ---------------------


def test_the_host_time_is_the_median_wait_of_requests_that_found_the_engine_idle() -> None:
    # Five lone prompts, one after another; each waited its own host time before its step.
    host = [0.005, 0.012, 0.015, 0.020, 0.110]  # the last one: a host stall
    its, reqs, t = [], [], 0.0
    for i, h in enumerate(host):
        its += [IterationSample(1, 100, 0, 0.02), IterationSample(0, 0, 1, 0.004)]
        reqs.append(MeasuredRequest(t, 100, 2, h + 0.02, None, (0.004,)))
        t += 1.0 + i
    replayed = replay_iterations(its, reqs, LOG_BUDGET)
    assert replayed[1] == 0
    from tierctl.sim.iteration_fit import _explained

    explained = _explained(its, reqs, LOG_BUDGET)
    assert explained is not None
    got = _request_host_time(its, reqs, explained[1], 0.0, 0.0)
    assert got == pytest.approx(0.015)


# -- the speculative round's draft and verify cost ----------------------------------------


def test_the_draft_and_verify_cost_are_fitted_from_a_speculative_runs_decode_steps() -> None:
    model = dataclasses.replace(LOG_TRUTH, decode_per_ctx_token_s=0.0)
    truth = dataclasses.replace(model, spec_draft_step_s=4e-4, spec_verify_per_token_s=2e-4)
    its = []
    for b in (1, 2, 4, 8, 1, 3, 6):
        for _ in range(5):
            its.append(IterationSample(0, 0, b, truth.decode_s(b, 0) + truth.spec_round_s(b, 3, 4)))
    its.append(IterationSample(1, 300, 2, 0.09))  # a mixed step: left out
    fitted, prov = fit_spec_step_cost(its, model, 3)
    assert fitted.spec_draft_step_s == pytest.approx(4e-4, rel=0.05)
    assert fitted.spec_verify_per_token_s == pytest.approx(2e-4, rel=0.05)
    assert prov["decode_steps"] == 35
    # And the simulator charges it: a speculative decode round costs more than a plain one.
    spec = EngineConfig.from_argv(
        [
            *LOG_CONFIG.argv,
            "--speculative-config",
            '{"method": "ngram", "num_speculative_tokens": 3}',
        ],
        engine="vllm",
    )
    wl = Workload.of("w", [SimRequest("a", 0.0, 50, 40)])
    with_cost = dataclasses.replace(fitted, spec_accept_rate=0.5)
    free = dataclasses.replace(with_cost, spec_draft_step_s=0.0, spec_verify_per_token_s=0.0)
    assert (
        simulate(spec, wl, with_cost, seed=1).summary.tpot_p50_s
        > simulate(spec, wl, free, seed=1).summary.tpot_p50_s
    )


def test_one_batch_size_cannot_separate_draft_from_verify() -> None:
    from tierctl.errors import InputError

    its = [IterationSample(0, 0, 4, 0.01) for _ in range(10)]
    with pytest.raises(InputError, match="batch sizes"):
        fit_spec_step_cost(its, LOG_TRUTH, 3)
