"""`tierctl sim` on a vLLM spec, the not-modelled warning, cost model files and fitting."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tierctl.errors import InputError
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import DENSE_8B_H100
from tierctl.sim.costfile import read_cost_model, write_cost_model
from tierctl.sim.iteration_fit import (
    IterationSample,
    chunk_positions,
    fit_iterations,
    iteration_residuals,
)
from tierctl.sim.simulate import simulate
from tierctl.sim.timing_fit import fit_timings
from tierctl.sim.workload import hammer

from .helpers import FLAT

VLLM_SPEC = Path(__file__).parent / "data" / "vllm-tier.yaml"


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0] in ("TTFT", "TPOT", "stall", "burst"):
            rows[parts[0] + " " + parts[1]] = parts
    return rows


def test_sim_run_on_a_vllm_spec_replica(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--spec", str(VLLM_SPEC), "--replica", "r2", "--workload",
                  "hammer", "--duration-s", "20", "--preset", "dense-8b-h100", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["argv"][:2] == ["vllm", "serve"]
    assert "/models/llama-3.1-70b" in doc["argv"]  # positional or --model, per the renderer
    assert {r["status"] for r in doc["requests"]} == {"completed"}


def test_compare_warns_per_unmodelled_flag(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "compare", "--spec", str(VLLM_SPEC), "--control-replica", "r1",
                  "--candidate-replica", "r3", "--workload", "hammer", "--duration-s", "20",
                  "--preset", "dense-8b-h100")  # fmt: skip
    assert res.code == 0, res.err
    assert "--gpu-memory-utilization differs between the arms but is not modelled" in res.err
    assert "not modelled, and different between the arms: --gpu-memory-utilization" in res.out
    assert "--port" not in res.err  # replica addresses differ by design
    assert _rows(res.out)["TPOT p50"][4] == "1.00"


def test_compare_of_a_modelled_flag_has_no_warning_and_moves_the_figures(
    run_cli: Callable[..., Any],
) -> None:
    res = run_cli("sim", "compare", "--spec", str(VLLM_SPEC), "--control-replica", "r1",
                  "--candidate-replica", "r2", "--workload", "hammer", "--rate", "40",
                  "--duration-s", "12", "--preset", "dense-8b-h100", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["not_modelled"] == []
    assert "warning" not in res.err
    tpot = next(r for r in doc["table"] if r["metric"] == "TPOT p50")
    assert tpot["ratio"] > 1.1  # twice the sequences per step: slower steps


def test_cost_model_file_round_trip_and_use(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    slow = dataclasses.replace(DENSE_8B_H100, name="slow", decode_base_s=0.06)
    write_cost_model(path, slow, {"fitted_on": ["by hand"], "method": "test"})
    model, prov = read_cost_model(path)
    assert model == slow
    assert prov["fitted_on"] == ["by hand"]
    assert "fitted_at" in prov
    args = ("sim", "run", "--workload", "hammer", "--duration-s", "20", "--format", "json", "--",
            "--chunked-prefill-size", "8192")  # fmt: skip
    fast = json.loads(run_cli(*args[:2], "--preset", "dense-8b-h100", *args[2:]).out)
    res = run_cli(*args[:2], "--cost-model", str(path), *args[2:])
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["preset"] == "slow"
    assert doc["summary"]["tpot_p50_s"] > 5 * fast["summary"]["tpot_p50_s"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("[]", "not a tierctl cost model file"),
        ('{"kind": "tierctl-cost-model", "model": {"decode_base_s": -1, "base": '
         '"dense-8b-h100"}}', "'decode_base_s' must be a non-negative number"),
        ('{"kind": "tierctl-cost-model", "model": {"decode_bse_s": 1, "base": '
         '"dense-8b-h100"}}', "unknown cost model field 'decode_bse_s'"),
        ('{"kind": "tierctl-cost-model", "model": {"decode_base_s": 1}}', "is missing"),
        ("{", "not JSON"),
    ],
)  # fmt: skip
def test_bad_cost_model_files_are_named_input_errors(
    tmp_path: Path, content: str, needle: str, run_cli: Callable[..., Any]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError) as exc:
        read_cost_model(path)
    assert needle in exc.value.format()
    res = run_cli("sim", "run", "--cost-model", str(path), "--workload", "hammer")
    assert res.code == 2
    assert "bad.json" in res.err
    assert "Traceback" not in res.err


def _measured(cfg: EngineConfig, truth: Any, seed: int = 0) -> list[MeasuredRequest]:
    wl = hammer(random.Random(seed), rate_per_s=3.0, duration_s=30.0, input_tokens=(100, 3000),
                output_tokens=(20, 200))  # fmt: skip
    res = simulate(cfg, wl, truth)
    return [
        MeasuredRequest(r.arrival_s, r.input_tokens, r.output_tokens, r.ttft_s or 0.0, r.tpot_s, ())
        for r in res.requests
    ]


def test_fit_from_request_timings_recovers_the_step_costs() -> None:
    cfg = EngineConfig.from_argv(["vllm", "serve", "/m", "--max-num-batched-tokens", "2048"])
    truth = dataclasses.replace(FLAT, prefill_base_s=0.004, prefill_per_token_s=2e-5,
                                decode_base_s=0.012, decode_per_seq_s=4e-4)  # fmt: skip
    start = dataclasses.replace(truth, prefill_per_token_s=1e-4, decode_base_s=0.05)
    model, res = fit_timings(_measured(cfg, truth), start, cfg)
    assert res["ttft_median_abs_rel_error"] < 0.05
    assert res["tpot_median_abs_rel_error"] < 0.05
    assert model.decode_base_s == pytest.approx(0.012, rel=0.2)
    assert model.prefill_per_token_s == pytest.approx(2e-5, rel=0.3)


def test_sim_fit_cli_reads_bench_results_and_writes_a_cost_model(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    cfg = EngineConfig.from_argv(["vllm", "serve", "/m", "--max-num-batched-tokens", "2048"])
    truth = dataclasses.replace(DENSE_8B_H100, decode_base_s=0.02)
    reqs = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": m.tpot_s, "e2e_s": 1.0, "itl_s": [],
         "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "outcome": "completed"}
        for m in _measured(cfg, truth)
    ]  # fmt: skip
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"kind": "run", "run": {"requests": reqs}}))
    out = tmp_path / "fitted.json"
    res = run_cli("sim", "fit", str(results), "--preset", "dense-8b-h100", "--output", str(out),
                  "--format", "json", "--", "vllm", "serve", "/m", "--max-num-batched-tokens", "2048")  # fmt: skip
    assert res.code == 0, res.err
    model, prov = read_cost_model(out)
    assert prov["samples"]["requests"] == len(reqs)
    assert prov["engine"] == "vllm"
    assert prov["residuals"]["tpot_median_abs_rel_error"] < 0.1
    assert model.decode_base_s == pytest.approx(0.02, rel=0.25)
    again = run_cli("sim", "fit", str(results), "--output", str(out))
    assert again.code == 2
    assert "exists" in again.err


def test_sim_fit_reads_sglang_decode_batch_lines(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    # Step time = 5 ms + 1 ms per sequence + 1e-8 s per context token; SGLang logs the
    # throughput (running / step time) every 40 decode rounds.
    lines = ["[2026-12-01 08:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, "
             "#cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0, "]  # fmt: skip
    for b, k in [(1, 10_000), (4, 50_000), (8, 400_000), (16, 100_000), (32, 900_000)]:
        step = 0.005 + 0.001 * b + 1e-8 * k
        lines.append(
            f"[2026-12-01 08:00:{b:02d} TP0] Decode batch. #running-req: {b}, #token: {k}, "
            f"token usage: 0.10, cuda graph: True, gen throughput (token/s): {b / step:.4f}, "
            "#queue-req: 0, "
        )
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.json"
    res = run_cli("sim", "fit", str(log), "--preset", "dense-8b-h100", "--output", str(out))
    assert res.code == 0, res.err
    model, prov = read_cost_model(out)
    assert prov["samples"] == {"decode_lines": 5}
    assert model.decode_per_seq_s == pytest.approx(0.001, rel=0.01)
    assert model.decode_base_s + model.round_overhead_s == pytest.approx(0.005, rel=0.05)
    assert model.prefill_per_token_s == DENSE_8B_H100.prefill_per_token_s  # not in the log


def _iteration_line(
    i: int, ctx_reqs: int, ctx_tok: int, gen: int, ms: float, dummy: bool = False
) -> str:
    # vLLM 0.32's LoggingStatLogger format with --enable-logging-iteration-details.
    return (
        f"(APIServer pid=1) INFO 12-01 09:21:35 [loggers.py:199] Engine 000: Iteration({i}): "
        f"{ctx_reqs} context requests, {ctx_tok} context tokens, {gen} generation requests, "
        f"{gen} generation tokens, iteration elapsed time: {ms:.2f} ms"
        f"{' (dummy)' if dummy else ''}, CPU KV cache usage: 3.0%"
    )


def test_sim_fit_reads_vllm_iteration_lines_and_fits_the_between_step_time(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    # Logged model time: prefill 6 ms + 40 us per token; decode 9 ms; 0.5 ms per decode row.
    # Between steps (not in the log): 4 ms per round and 1 ms per running sequence.
    rng = random.Random(3)
    lines = ["(APIServer pid=1) INFO non-default args: {'max_num_batched_tokens': 2048}"]
    for i in range(60):
        gen = rng.randint(0, 8)
        ctx = rng.choice([0, 0, rng.randint(16, 2048)])
        if ctx == 0 and gen == 0:
            gen = 1
        ms = (6.0 + 0.04 * ctx if ctx else 9.0) + 0.5 * gen
        lines.append(_iteration_line(i, 1 if ctx else 0, ctx, gen, ms))
    lines.append(_iteration_line(60, 0, 0, 0, 0.0, dummy=True))  # a DP dummy step: skipped
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    argv = ["vllm", "serve", "/m", "--max-num-batched-tokens", "2048"]
    cfg = EngineConfig.from_argv(argv)
    truth = dataclasses.replace(
        FLAT, prefill_base_s=0.006, prefill_per_token_s=4e-5, decode_base_s=0.009,
        decode_per_seq_s=5e-4 + 1e-3, round_overhead_s=0.004,
    )  # fmt: skip
    reqs = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": m.tpot_s, "e2e_s": 1.0, "itl_s": [],
         "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "outcome": "completed"}
        for m in _measured(cfg, truth)
    ]  # fmt: skip
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"kind": "run", "run": {"requests": reqs}}))
    out = tmp_path / "m.json"
    steps_only = run_cli(
        "sim", "fit", str(log), "--preset", "dense-8b-h100", "--format", "json", "--", *argv
    )
    assert steps_only.code == 0, steps_only.err
    doc = json.loads(steps_only.out)
    assert doc["provenance"]["samples"] == {"iterations": 60}
    assert doc["prefill_per_token_s"] == pytest.approx(4e-5, rel=0.01)
    assert doc["prefill_base_s"] == pytest.approx(0.006, rel=0.01)
    assert doc["decode_base_s"] == pytest.approx(0.009, rel=0.01)
    assert doc["decode_per_seq_s"] == pytest.approx(5e-4, rel=0.01)
    assert doc["round_overhead_s"] == DENSE_8B_H100.round_overhead_s  # not in the log
    # The log's steps are drawn apart from the timings' requests: its replay against them
    # mismatches, which is refused unless allowed (then warned, issue #40).
    refused = run_cli("sim", "fit", str(log), "--timings", str(results), "--preset",
                      "dense-8b-h100", "--out", str(out), "--", *argv)  # fmt: skip
    assert refused.code == 2
    assert "replay against the timings mismatched" in refused.err
    res = run_cli("sim", "fit", str(log), "--timings", str(results), "--preset",
                  "dense-8b-h100", "--output", str(out), "--allow-replay-mismatch", "--", *argv)  # fmt: skip
    assert res.code == 0, res.err
    assert "warning: the iteration log's replay against the timings mismatched" in res.err
    model, prov = read_cost_model(out)
    assert prov["warnings"]
    assert prov["samples"] == {"iterations": 60, "requests": len(reqs)}
    # What the timings pin is a whole round (the split between per round and per sequence is
    # loose when few requests run at once): within 10 % at the batch sizes this run had.
    for b in (1, 3, 6):
        got = model.round_overhead_s + model.decode_s(b, 0)
        assert got == pytest.approx(truth.round_overhead_s + truth.decode_s(b, 0), rel=0.1)
    assert model.round_overhead_s > 0.002
    assert prov["residuals"]["tpot_median_abs_rel_error"] < 0.1


def test_a_vllm_log_without_iteration_lines_is_a_named_input_error(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(_iteration_line(0, 1, 100, 0, 5.0) + "\n")
    res = run_cli("sim", "fit", str(log), "--from", "vllm-log")
    assert res.code == 2
    assert "too few vLLM iteration lines" in res.err
    assert "--enable-logging-iteration-details" in res.err
    assert "Traceback" not in res.err


def test_vllm_iteration_fit_rebuilds_chunk_positions_for_the_attention_term() -> None:
    # A 512-token budget: a lone prefill that fills it was cut there, and the next step's lone
    # prefill continues that prompt (its chunk attends to everything before it).
    truth = dataclasses.replace(
        FLAT, prefill_base_s=0.01, prefill_per_token_s=1e-4, prefill_attn_pair_s=1.2e-7,
        decode_base_s=0.006, decode_per_seq_s=2e-3,
    )  # fmt: skip
    its: list[IterationSample] = []
    for prompt in (1500, 2600, 700, 3000):
        done = 0
        while done < prompt:
            c = min(512, prompt - done)
            t = truth.prefill_s([(c, done)]) + truth.decode_marginal_s(0, 0)
            its.append(IterationSample(1, c, 0, t))
            done += c
        for b in (1, 2, 3):
            its.append(IterationSample(0, 0, b, truth.decode_s(b, 0)))
    positions = chunk_positions(its, 512)
    assert positions[:4] == [0, 512, 1024, 0]  # 1500 = 512 + 512 + 476, then a decode step
    model = fit_iterations(its, FLAT, name="t", budget_tokens=512)
    assert model.prefill_attn_pair_s == pytest.approx(1.2e-7, rel=0.01)
    assert model.prefill_per_token_s == pytest.approx(1e-4, rel=0.01)
    assert model.decode_per_seq_s == pytest.approx(2e-3, rel=0.01)
    assert iteration_residuals(model, its, 512)["prefill_mean_abs_rel_error"] < 1e-6
    # Without the budget every chunk looks like a fresh prompt and the fit cannot see it.
    blind = fit_iterations(its, FLAT, name="t")
    assert blind.prefill_attn_pair_s != pytest.approx(1.2e-7, rel=0.1)
    assert iteration_residuals(blind, its)["prefill_mean_abs_rel_error"] > 0.01


def test_compare_refuses_what_the_pinned_vllm_refuses_at_start_up(
    run_cli: Callable[..., Any],
) -> None:
    # The reproducer: chunked prefill off with prompts over the budget hung `sim
    # compare`; vLLM 0.32 refuses the configuration at start-up, and so does the simulator.
    base = "vllm serve m --max-num-seqs 8 --max-model-len 4096"
    res = run_cli("sim", "compare", "--engine-version", "0.32.0", "--control", base,
                  "--candidate", base + " --max-num-batched-tokens 512 --no-enable-chunked-prefill",
                  "--workload", "burst", "--count", "2", "--input-tokens", "3000",
                  "--output-tokens", "4", "--preset", "dense-8b-h100")  # fmt: skip
    assert res.code == 2, res.out
    assert "vLLM 0.32.0 refuses to start" in res.err
    assert "Traceback" not in res.err
    res = run_cli("sim", "compare", "--engine-version", "0.32.0", "--control", base,
                  "--candidate", base + " --max-num-partial-prefills 2",
                  "--workload", "burst", "--count", "2", "--input-tokens", "3000")  # fmt: skip
    assert res.code == 2
    assert "--max-num-partial-prefills is not a flag of vllm 0.32.0" in res.err


def test_compare_never_prints_a_silent_ratio_for_a_step_cost_flag(
    run_cli: Callable[..., Any],
) -> None:
    base = "vllm serve m --max-num-seqs 8 --max-model-len 4096"
    for flag in ("--dtype float32", "--enforce-eager", "--kv-cache-dtype fp8"):
        res = run_cli("sim", "compare", "--control", base, "--candidate", f"{base} {flag}",
                      "--workload", "burst", "--count", "2", "--input-tokens", "1000",
                      "--output-tokens", "4", "--preset", "dense-8b-h100")  # fmt: skip
        assert res.code == 0, res.err
        name = flag.split()[0]
        assert f"warning: {name} differs between the arms and changes the engine's step cost" in (
            res.err
        )
        assert f"step cost held fixed (the ratios leave them out): {name}" in res.out


def test_compare_says_when_speculation_is_unpriced(run_cli: Callable[..., Any]) -> None:
    """A cost model without acceptance decodes one token a round: turning ngram speculative
    decoding on printed 1.00 on every figure with no word (the what-if benchmark's real engine
    accepted all 192 of its drafts). It is now named as held fixed."""
    base = "vllm serve m --max-num-seqs 8 --max-model-len 4096"
    spec = """ --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'"""
    res = run_cli("sim", "compare", "--control", base, "--candidate", base + spec,
                  "--workload", "burst", "--count", "2", "--input-tokens", "1000",
                  "--output-tokens", "4", "--preset", "dense-8b-h100")  # fmt: skip
    assert res.code == 0, res.err
    assert "warning: --speculative-config differs between the arms and changes" in res.err
    assert "step cost held fixed (the ratios leave them out): --speculative-config" in res.out


def test_sim_fit_out_goes_through_the_checked_writer(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """A reproducer of the hostile sweep: `--out` into a folder that does not exist raised
    FileNotFoundError (the cost-model writer wrote the file directly); `--out /dev/full` is a
    device, refused with a message, never written into."""
    cfg = EngineConfig.from_argv(["vllm", "serve", "/m", "--max-num-batched-tokens", "2048"])
    reqs = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": m.tpot_s, "e2e_s": 1.0, "itl_s": [],
         "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "outcome": "completed"}
        for m in _measured(cfg, DENSE_8B_H100)
    ]  # fmt: skip
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"kind": "run", "run": {"requests": reqs}}))
    argv = ["--", "vllm", "serve", "/m", "--max-num-batched-tokens", "2048"]
    out = tmp_path / "new" / "folder" / "fitted.json"
    res = run_cli(
        "sim", "fit", str(results), "--preset", "dense-8b-h100", "--output", str(out), *argv
    )
    assert res.code == 0, res.err
    assert read_cost_model(out)[1]["engine"] == "vllm"
    dev = run_cli("sim", "fit", str(results), "--output", "/dev/full", "--force", *argv)
    assert dev.code == 2, dev.err
    assert "Traceback" not in dev.err
