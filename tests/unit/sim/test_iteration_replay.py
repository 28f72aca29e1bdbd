"""Replaying a vLLM iteration log against the requests it served (fitting's step shapes).

The logs here are written by the simulator's own vLLM scheduler (its rounds, in the log's
terms), so the truth is known: which chunks each step held, where in its prompt each started
and how many context tokens its decoders attended to.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.costfile import read_cost_model
from tierctl.sim.engine import Round
from tierctl.sim.iteration_fit import (
    IterationSample,
    fit_iterations,
    fit_overheads,
    iteration_residuals,
    iteration_shapes,
    replay_iterations,
)
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT, LOG_BUDGET, LOG_CONFIG, LOG_TRUTH, logged_run, logged_sample


def _run(
    seed: int, count: int = 30
) -> tuple[list[Round], list[IterationSample], list[MeasuredRequest]]:
    return logged_run(LOG_TRUTH, seed, count=count)


def _timed(truth: CostModel, seed: int) -> tuple[list[IterationSample], list[MeasuredRequest]]:
    """A simulated run with known host terms, logged the way vLLM logs it (the model's time
    only) and timed the way the client sees it (every token at its step's end)."""
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(40):
        reqs.append(SimRequest(f"r{i}", t, rng.randint(20, 1500), rng.randint(2, 80)))
        t += rng.expovariate(2.0)
    rounds: list[Round] = []
    simulate(LOG_CONFIG, Workload.of("w", reqs), truth, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    bare = dataclasses.replace(truth, round_overhead_s=0.0, detokenize_per_token_s=0.0)
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
    return [logged_sample(bare, r) for r in rounds], measured


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_the_replay_rebuilds_every_steps_chunks_and_decode_context(seed: int) -> None:
    rounds, its, reqs = _run(seed)
    shapes, bad = replay_iterations(its, reqs, LOG_BUDGET)
    assert bad == 0
    for r, sh in zip(rounds, shapes, strict=True):
        assert sh.chunks == r.chunks
        assert sh.decoders == r.batch_size - len(r.chunks)
        assert sh.decode_context_tokens == r.context_tokens


def test_a_fit_with_the_requests_recovers_the_context_term_the_counts_alone_cannot() -> None:
    _, its, reqs = _run(3, count=40)
    model = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=reqs)
    for f in ("prefill_base_s", "prefill_per_token_s", "prefill_attn_pair_s",
              "decode_base_s", "decode_per_seq_s", "decode_per_ctx_token_s"):  # fmt: skip
        assert getattr(model, f) == pytest.approx(getattr(LOG_TRUTH, f), rel=0.02), f
    res = iteration_residuals(model, its, LOG_BUDGET, reqs)
    assert res["decode_mean_abs_rel_error"] < 1e-6
    assert res["prefill_mean_abs_rel_error"] < 1e-6
    blind = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET)
    assert blind.decode_per_ctx_token_s == 0.0
    assert iteration_residuals(blind, its, LOG_BUDGET)["decode_mean_abs_rel_error"] > 0.05


def test_two_requests_the_server_handed_on_in_the_other_order_are_matched() -> None:
    # A 100- and a 300-token prompt sent 1 ms apart; the engine admitted the second first.
    reqs = [MeasuredRequest(0.0, 100, 3, 0.0, None, ()),
            MeasuredRequest(0.001, 300, 2, 0.0, None, ())]  # fmt: skip
    its = [IterationSample(1, 300, 0, 0.03), IterationSample(1, 100, 1, 0.02),
           IterationSample(0, 0, 1, 0.005), IterationSample(0, 0, 1, 0.005)]  # fmt: skip
    shapes, bad = replay_iterations(its, reqs, LOG_BUDGET)
    assert bad == 0
    assert [sh.decode_context_tokens for sh in shapes] == [0, 301, 101, 102]


def test_a_prefix_cache_hit_starts_the_chunk_after_the_cached_part() -> None:
    # 160 of a 200-token prompt were cached: the step computed 40, attending to 160 before.
    reqs = [MeasuredRequest(0.0, 200, 2, 0.0, None, ())]
    its = [IterationSample(1, 40, 0, 0.02), IterationSample(0, 0, 1, 0.005)]
    shapes, bad = replay_iterations(its, reqs, LOG_BUDGET)
    assert bad == 0
    assert shapes[0].chunks == ((40, 160),)
    assert shapes[1].decode_context_tokens == 201


def test_a_log_with_other_traffic_falls_back_to_the_budget_rebuild() -> None:
    _, its, reqs = _run(5)
    # Half the requests missing: the replay cannot explain the log.
    shapes = iteration_shapes(its, LOG_BUDGET, reqs[: len(reqs) // 2])
    assert all(sh.decode_context_tokens == 0 for sh in shapes)
    _, bad = replay_iterations(its, reqs[: len(reqs) // 2], LOG_BUDGET)
    assert bad * 20 > len(its)


def test_the_detokenize_term_is_charged_per_streamed_token() -> None:
    m = dataclasses.replace(LOG_TRUTH, detokenize_per_token_s=1e-4)
    assert m.decode_s(4, 1000) - LOG_TRUTH.decode_s(4, 1000) == pytest.approx(4e-4)
    assert m.decode_marginal_s(3, 0) - LOG_TRUTH.decode_marginal_s(3, 0) == pytest.approx(3e-4)
    # The step log's elapsed time excludes it: residuals against a log ignore it.
    _, its, reqs = _run(7)
    fitted = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=reqs)
    with_detok = dataclasses.replace(fitted, detokenize_per_token_s=1e-3)
    assert iteration_residuals(with_detok, its, LOG_BUDGET, reqs) == iteration_residuals(
        fitted, its, LOG_BUDGET, reqs
    )


def test_the_time_between_steps_and_per_request_are_measured_from_the_log_and_timings() -> None:
    truth = dataclasses.replace(
        LOG_TRUTH, round_overhead_s=0.0015, detokenize_per_token_s=2e-4, request_overhead_s=0.006
    )
    its, measured = _timed(truth, 11)
    steps = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=measured)
    fitted, res = fit_overheads(
        steps, measured, LOG_CONFIG, iterations=its, budget_tokens=LOG_BUDGET
    )
    assert "measured" in res["between_steps"]
    assert fitted.round_overhead_s == pytest.approx(0.0015, rel=0.1)
    assert fitted.detokenize_per_token_s == pytest.approx(2e-4, rel=0.15)
    assert fitted.request_overhead_s == pytest.approx(0.006, rel=0.1)


def test_step_jitter_is_drawn_from_the_seed_and_fitted_from_the_logs_spread() -> None:
    noisy = dataclasses.replace(LOG_TRUTH, step_jitter=0.2)
    rng = random.Random(2)
    reqs = [SimRequest(f"r{i}", i * 0.3, rng.randint(20, 1500), 40) for i in range(30)]
    wl = Workload.of("w", reqs)
    plain = simulate(LOG_CONFIG, wl, LOG_TRUTH)
    a, b = simulate(LOG_CONFIG, wl, noisy, seed=1), simulate(LOG_CONFIG, wl, noisy, seed=1)
    c = simulate(LOG_CONFIG, wl, noisy, seed=2)
    ttft = [[r.ttft_s for r in res.requests] for res in (plain, a, b, c)]
    assert ttft[1] == ttft[2]  # same seed, same run
    assert ttft[1] != ttft[3]
    assert ttft[1] != ttft[0]
    # Fitted back from a log of jittered steps: the spread is measured, the median kept.
    rounds: list[Round] = []
    simulate(LOG_CONFIG, wl, noisy, seed=3, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    its = [dataclasses.replace(logged_sample(LOG_TRUTH, r), elapsed_s=r.duration_s) for r in rounds]
    measured = [MeasuredRequest(r.arrival_s, r.input_tokens, r.output_tokens, 0.0, None, ())
                for r in reqs]  # fmt: skip
    fitted = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=measured)
    assert fitted.step_jitter == pytest.approx(0.2, rel=0.2)
    assert fitted.prefill_per_token_s == pytest.approx(LOG_TRUTH.prefill_per_token_s, rel=0.15)
    exact = fit_iterations(
        [logged_sample(LOG_TRUTH, r) for r in rounds], FLAT, name="t", budget_tokens=LOG_BUDGET,
        requests=measured,
    )  # fmt: skip
    assert exact.step_jitter < 1e-6


def test_sim_fit_from_a_vllm_log_with_timings_replays_and_measures_the_host_terms(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    truth = dataclasses.replace(
        LOG_TRUTH, round_overhead_s=0.002, detokenize_per_token_s=3e-4, request_overhead_s=0.008
    )
    its, measured = _timed(truth, 4)
    lines = [
        f"(APIServer pid=1) INFO 12-01 09:21:35 [loggers.py:199] Engine 000: Iteration({i}): "
        f"{s.context_requests} context requests, {s.context_tokens} context tokens, "
        f"{s.generation_requests} generation requests, {s.generation_requests} generation "
        f"tokens, iteration elapsed time: {s.elapsed_s * 1e3:.3f} ms, CPU KV cache usage: 1%"
        for i, s in enumerate(its)
    ]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    rows = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": None, "e2e_s": m.ttft_s + sum(m.itl_s),
         "outcome": "completed", "itl_s": list(m.itl_s), "input_tokens": m.input_tokens,
         "output_tokens": m.output_tokens}
        for m in measured
    ]  # fmt: skip
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"kind": "run", "run": {"requests": rows}}))
    out = tmp_path / "m.json"
    res = run_cli("sim", "fit", str(log), "--timings", str(results), "--preset",
                  "dense-8b-h100", "--output", str(out), "--", *LOG_CONFIG.argv)  # fmt: skip
    assert res.code == 0, res.err
    model, prov = read_cost_model(out)
    assert prov["residuals"]["replay_mismatched_steps"] == 0
    assert "replaying the log" in prov["method"]
    assert model.decode_per_ctx_token_s == pytest.approx(LOG_TRUTH.decode_per_ctx_token_s, rel=0.05)
    assert model.round_overhead_s == pytest.approx(0.002, rel=0.15)
    assert model.detokenize_per_token_s == pytest.approx(3e-4, rel=0.2)
    assert model.request_overhead_s == pytest.approx(0.008, rel=0.1)


def test_a_jittered_prediction_is_the_median_of_several_simulated_runs() -> None:
    from tierctl.fidelity import figures, predict, predicted_figures

    rng = random.Random(9)
    plan = [MeasuredRequest(i * 0.2, rng.randint(50, 1500), 30, 0.0, None, ()) for i in range(25)]
    assert predicted_figures(plan, LOG_CONFIG, LOG_TRUTH) == figures(
        predict(plan, LOG_CONFIG, LOG_TRUTH)
    )
    noisy = dataclasses.replace(LOG_TRUTH, step_jitter=0.3)
    draws = [figures(predict(plan, LOG_CONFIG, noisy, seed=k)) for k in range(5)]
    got = predicted_figures(plan, LOG_CONFIG, noisy, runs=5)
    for metric, value in got.items():
        vals = sorted(d[metric] for d in draws)  # type: ignore[type-var]
        assert value == vals[2], metric
    assert len({d["TTFT p90"] for d in draws}) > 1  # the seeds do draw different runs


def test_a_batch_admitted_in_one_step_beyond_the_reorder_window_replays() -> None:
    """sim fit-plan's decode batches arrive together: at a 4,096-token budget one step
    admits 7 of them whole and an eighth cut. The replay looked only 4 requests deep and
    lost the whole log after that step (129 of 519 real steps, the what-if benchmark's fit)."""
    cfg = EngineConfig.from_argv(
        ["vllm", "serve", "m", "--max-num-seqs", "16", "--max-num-batched-tokens", "4096",
         "--num-gpu-blocks-override", "65536"]
    )  # fmt: skip
    reqs = [SimRequest(f"b{i}", 0.0, 539, 16) for i in range(14)]
    reqs += [SimRequest(f"l{i}", 2.0 + i, 300 * (i + 1), 8) for i in range(3)]
    rounds: list[Round] = []
    simulate(cfg, Workload.of("w", reqs), LOG_TRUTH, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    assert max(len(r.chunks) for r in rounds) > 4  # the case: more admitted than the window
    its = [logged_sample(LOG_TRUTH, r) for r in rounds]
    measured = [MeasuredRequest(r.arrival_s, r.input_tokens, r.output_tokens, 0.0, None, ())
                for r in reqs]  # fmt: skip
    shapes, bad = replay_iterations(its, measured, 4096)
    assert bad == 0
    assert [s.chunks for s in shapes] == [tuple(r.chunks) for r in rounds]


def test_the_time_between_steps_survives_tokens_handed_on_in_one_piece() -> None:
    """A busy host hands several tokens to the client at once: gaps of 0, then one long one
    (the real engine at load 18). Each request's span from first to last token is the same,
    so the measured time between steps must be too; read from single gaps it fell to 0."""
    truth = dataclasses.replace(
        LOG_TRUTH, round_overhead_s=0.0015, detokenize_per_token_s=2e-4, request_overhead_s=0.006
    )
    its, measured = _timed(truth, 11)
    merged = []
    for m in measured:
        gaps = list(m.itl_s)
        # every run of three tokens arrives together: two gaps of 0, the third carries all
        for i in range(0, len(gaps) - 2, 3):
            gaps[i + 2] += gaps[i] + gaps[i + 1]
            gaps[i] = gaps[i + 1] = 0.0
        merged.append(dataclasses.replace(m, itl_s=tuple(gaps)))
    steps = fit_iterations(its, FLAT, name="t", budget_tokens=LOG_BUDGET, requests=merged)
    fitted, res = fit_overheads(steps, merged, LOG_CONFIG, iterations=its, budget_tokens=LOG_BUDGET)
    assert "measured" in res["between_steps"]
    assert fitted.round_overhead_s == pytest.approx(0.0015, rel=0.1)
    assert fitted.detokenize_per_token_s == pytest.approx(2e-4, rel=0.15)


def test_timings_that_dropped_streams_without_a_first_token_are_refused_with_the_counts(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    # Issue #40: 2 streams with no TTFT were left out by --timings; the replay mismatched 419
    # of 2,276 steps, the decode context cost came out 0, and the fit was accepted silently.
    its, measured = _timed(LOG_TRUTH, 4)
    lines = [
        f"INFO Engine 000: Iteration({i}): {s.context_requests} context requests, "
        f"{s.context_tokens} context tokens, {s.generation_requests} generation requests, "
        f"{s.generation_requests} generation tokens, iteration elapsed time: "
        f"{s.elapsed_s * 1e3:.3f} ms"
        for i, s in enumerate(its)
    ]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    rows = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": None, "e2e_s": m.ttft_s + sum(m.itl_s),
         "outcome": "completed", "itl_s": list(m.itl_s), "input_tokens": m.input_tokens,
         "output_tokens": m.output_tokens}
        for m in measured
    ]  # fmt: skip
    for k in (2, 5):  # two early streams read with no first token
        rows[k] = {**rows[k], "ttft_s": None}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"kind": "run", "run": {"requests": rows}}))
    args = ("sim", "fit", str(log), "--timings", str(results), "--preset", "dense-8b-h100")
    res = run_cli(*args, "--", *LOG_CONFIG.argv)
    assert res.code == 2
    assert f"2 of the timings' {len(rows)} requests have no first token" in res.err
    assert "--allow-replay-mismatch" in res.err
    out = tmp_path / "m.json"
    allowed = run_cli(*args, "--allow-replay-mismatch", "--out", str(out), "--", *LOG_CONFIG.argv)
    assert allowed.code == 0, allowed.err
    assert "warning: the iteration log's replay" in allowed.err
    _, prov = read_cost_model(out)
    assert prov["residuals"]["timings_left_out"] == 2
    assert prov["residuals"]["replay_mismatched_steps"] * 20 > len(its)
    assert "2 of the timings'" in prov["warnings"][0]
