"""Does the simulator predict a real engine? Fit on one workload, predict four others.

Run: PYTHONPATH=src /work/main/.venv/bin/python benchmarks/sim_fidelity.py [--quick]

Starts one real vLLM engine on CPU (the tiny Llama, via tierctl.realengine; scripts/ensure-vllm
installs it) with ``--enable-logging-iteration-details`` on a loopback port and always stops
it. Fits two cost models on one workload (Poisson stages of rising rate: quiet, busy,
saturated): from the request timings alone (``tierctl sim fit --from bench``'s method) and from
the engine's iteration log with the same run's timings (``--from vllm-log --timings``: the log
replayed against the requests, so every step's chunk positions and decode contexts are known,
and the time between steps and per request measured from the timings). Then plays a burst, a
Poisson hammer, long prompts arriving while requests decode, and the bundled tiny trace, each
three times (``--repeats``), and prints the median run's TTFT p50/p90, TPOT p50 and ITL p90,
how far the runs spread (the measurement's own noise), and both models' predictions with their
errors against the median. Each workload has its own prompts (vLLM's prefix
cache would otherwise serve one workload from another's), and a workload whose client fell
behind (a send over 50 ms late or its event loop stalled over 100 ms: the machine stalled, and
the figures would be the client's) is measured again, at most twice. Every loop is bounded (fixed
request counts, per-request time-outs, bounded retries).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("--max-num-seqs", "8", "--max-num-batched-tokens", "512")
LOG_FLAG = "--enable-logging-iteration-details"


def _log_since(log: Path, mark: int) -> str:
    """What ``log`` gained after byte ``mark``."""
    with log.open("rb") as fh:
        fh.seek(mark)
        return fh.read().decode(errors="replace")


def _served_logged(log: Path, mark: int, requests: list[Any]) -> bool:
    """Whether ``log`` holds, after ``mark``, every step that served ``requests``."""
    from tierctl.fidelity import iteration_log_complete

    return iteration_log_complete(_log_since(log, mark), requests)


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from tierctl.errors import RuntimeFailure
    from tierctl.fidelity import (
        PlannedSend,
        burst_plan,
        decoders_and_long_plan,
        figures,
        measure,
        measure_checked,
        poisson_plan,
        predicted_figures,
    )
    from tierctl.realengine.engine import BASE_FLAGS, SERVED_NAME, VllmEngine
    from tierctl.results import MeasuredRequest
    from tierctl.runtime.polling import wait_until
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.cost import DENSE_8B_H100
    from tierctl.sim.iteration_fit import (
        fit_iterations,
        fit_overheads,
        iteration_residuals,
        parse_vllm_iterations,
        vllm_token_budget,
    )
    from tierctl.sim.timing_fit import fit_timings

    q = args.quick
    rng = random.Random(0)
    fit_plan = _stepped_plan(
        rng, [(1.0, 6 if q else 15), (2.0, 6 if q else 20), (3.5, 8 if q else 25)]
    )
    trace = [json.loads(line) for line in (ROOT / "examples/workloads/traces/tiny.jsonl").open()]
    trace_plan = [
        PlannedSend(t["arrival_s"], min(t["input_tokens"], 3000), min(t["output_tokens"], 64))
        for t in trace
    ]
    plans = {
        "burst 8 x 1500": burst_plan(8, 1500, 48),
        "Poisson hammer": poisson_plan(rng, 5.0, 20 if q else 60, (32, 256), (16, 64)),
        # The decoders stay in the batch through every long prompt's chunks: with the long
        # prompts a second apart they finished between them, and the inter-token gaps'
        # p90 sat on the edge between the fast mode and the stalled one (9 ms or 115 ms
        # depending on a single step), which no model of step times can predict.
        "long prompts + decoders": decoders_and_long_plan(
            3, 3, 3000, 0.5, decoder_output=80, first_s=0.25
        ),
        "trace (tiny.jsonl)": trace_plan,
    }
    config = EngineConfig.from_argv(
        ["vllm", "serve", "tiny", *BASE_FLAGS, *FLAGS, "--num-gpu-blocks-override", "65536"]
    )
    base = dataclasses.replace(DENSE_8B_H100, name="cpu-start", kv_pool_tokens=1_000_000)
    logdir = Path(tempfile.mkdtemp(prefix="sim-fidelity-"))
    log = logdir / "vllm.log"
    with VllmEngine(log, flags=(*FLAGS, LOG_FLAG), name="fidelity") as engine:
        engine.start()
        started = engine.wait_ready(args.start_timeout_s)
        print(f"vLLM CPU engine ready in {started:.0f} s ({engine.url}, flags {' '.join(FLAGS)})")
        url = engine.url
        # Warm-up, not measured: a long prompt too, so first-use costs (kernel selection, the
        # first large allocations) do not land in the fit run.
        asyncio.run(
            measure(url, SERVED_NAME, burst_plan(2, 64, 8) + burst_plan(1, 2048, 8), seed=99)
        )
        t = time.perf_counter()

        def run(name: str, plan: list[PlannedSend], seed: int) -> list[MeasuredRequest]:
            for attempt in range(3):
                mark = log.stat().st_size
                got, check = asyncio.run(measure_checked(url, SERVED_NAME, plan, seed=seed))

                # vLLM logs a step after it streamed: wait for the steps that served the run.
                served = functools.partial(_served_logged, log, mark, got)
                wait_until(served, 30, poll_s=0.05)
                _save_text(args.save, name, _log_since(log, mark))
                if check.trusted():
                    return got
                print(f"  {name}: the client fell behind (send "
                      f"{check.pacing_lag_max_s or 0.0:.3f} s late, loop lag "
                      f"{check.loop_lag_max_s or 0.0:.3f} s); measuring again "
                      f"({attempt + 1} of 2)" if attempt < 2 else
                      f"  {name}: the client fell behind again; keeping this run")  # fmt: skip
                seed += 1000  # fresh prompts: the last attempt's are in the prefix cache
            return got

        fit_on = run("fit", fit_plan, 1)
        its = parse_vllm_iterations(_saved_text(args.save, "fit"))
        _save(args.save, "fit", fit_on)
        models = {}
        old, res = fit_timings(fit_on, base, config, name="fitted:vllm-cpu-tiny:timings")
        print(f"fitted on {len(fit_on)} Poisson requests in {time.perf_counter() - t:.0f} s")
        print(f"  timings alone: residual TTFT median {res['ttft_median_abs_rel_error']:.1%}, "
              f"TPOT median {res['tpot_median_abs_rel_error']:.1%}")  # fmt: skip
        models["timings"] = old
        budget = vllm_token_budget(config, base)
        steps = fit_iterations(its, base, name="fitted:vllm-cpu-tiny:iterations",
                               budget_tokens=budget, requests=fit_on)  # fmt: skip
        sres = iteration_residuals(steps, its, budget, fit_on)
        new, nres = fit_overheads(steps, fit_on, config, iterations=its, budget_tokens=budget)
        print(f"  iteration log ({len(its)} steps; step-time residual prefill "
              f"{sres['prefill_mean_abs_rel_error']:.1%}, decode "
              f"{sres['decode_mean_abs_rel_error']:.1%}) + between-step time: residual TTFT "
              f"median {nres['ttft_median_abs_rel_error']:.1%}, TPOT median "
              f"{nres['tpot_median_abs_rel_error']:.1%}")  # fmt: skip
        models["log"] = new
        print(f"  {'coefficient':<24}{'timings':>12}{'log':>12}")
        for f in ("prefill_base_s", "prefill_per_token_s", "prefill_attn_pair_s",
                  "decode_base_s", "decode_per_seq_s", "decode_per_ctx_token_s",
                  "round_overhead_s", "request_overhead_s",
                  "detokenize_per_token_s"):  # fmt: skip
            print(f"  {f:<24}{getattr(old, f):>12.4g}{getattr(new, f):>12.4g}")
        worst = dict.fromkeys(models, 0.0)
        spread_worst = 0.0
        for n, (name, plan) in enumerate(plans.items()):
            cpu0 = _cpu_seconds()
            w0 = time.monotonic()
            runs = []
            try:
                # The same plan several times with fresh prompts: the prediction is judged
                # against the median run, and how far the runs spread is the floor under
                # any prediction's error on this machine.
                for k in range(args.repeats):
                    label = name if k == 0 else f"{name} (run {k + 1})"
                    runs.append(run(label, plan, 2 + n + 100 * k))
                    _save(args.save, label, runs[-1])
            except RuntimeFailure as exc:
                print(f"\n{name}: the engine failed ({exc}); stopping. Engine log: {log}")
                return 1
            busy = (_cpu_seconds() - cpu0) / (time.monotonic() - w0)
            per_run = [figures(got) for got in runs]
            measured = {
                m: statistics.median(v) if (v := [f[m] for f in per_run if f[m]]) else None
                for m in per_run[0]
            }
            preds = {k: predicted_figures(runs[0], config, m) for k, m in models.items()}
            # The machine's load while it ran: step times follow it on a shared host.
            print(f"\n{name} ({len(runs[0])} requests x {len(runs)} runs; all processes kept "
                  f"{busy:.1f} of {os.cpu_count()} CPUs busy, load average "
                  f"{os.getloadavg()[0]:.1f})")  # fmt: skip
            print(f"  {'figure':<10}{'measured':>12}{'runs spread':>14}"
                  + "".join(f"{k + ' pred':>16}{'error':>8}" for k in models))  # fmt: skip
            for metric, value in measured.items():
                vals = [f[metric] for f in per_run if f[metric]]
                line = f"  {metric:<10}" + (f"{value * 1000:>9.1f} ms" if value else f"{'-':>12}")
                spread = (max(vals) - min(vals)) / value if value and len(vals) > 1 else None
                line += f"{spread:>14.0%}" if spread is not None else f"{'-':>14}"
                if spread is not None:
                    spread_worst = max(spread_worst, spread)
                for k in models:
                    p = preds[k][metric]
                    err = p / value - 1 if p is not None and value else None
                    line += f"{p * 1000:>13.1f} ms" if p is not None else f"{'-':>16}"
                    line += f"{err:>+8.0%}" if err is not None else f"{'-':>8}"
                    if err is not None:
                        worst[k] = max(worst[k], abs(err))
                print(line)
        print("\nworst error against the median run: "
              + ", ".join(f"{k} {v:.0%}" for k, v in worst.items())
              + f" (goal: within 15 %); engine log {log}")  # fmt: skip
        if args.repeats > 1:
            print(f"the runs of one workload spread by up to {spread_worst:.0%} of their median "
                  "(max - min): the measurement's own noise on this machine")  # fmt: skip
    return 0


def _cpu_seconds() -> float:
    """CPU seconds every process on the machine has used (user + system, /proc/stat)."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def _stepped_plan(rng: random.Random, stages: list[tuple[float, int]]) -> list[Any]:
    """The fit workload: Poisson stages of rising rate (quiet, then busy, then saturated), so
    the fit sees requests that found the engine idle as well as queued ones; prompt lengths
    log-uniform over 32-2500 tokens (short ones as well represented as long), outputs 16-128."""
    import math

    from tierctl.fidelity import PlannedSend

    t, out = 0.0, []
    for rate, count in stages:
        for _ in range(count):
            prompt = round(math.exp(rng.uniform(math.log(32), math.log(2500))))
            out.append(PlannedSend(t, prompt, rng.randint(16, 128)))
            t += rng.expovariate(rate)
    return out


_TEXTS: dict[str, str] = {}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def _save_text(folder: str | None, name: str, text: str) -> None:
    """Keep a workload's slice of the engine log (for refitting offline)."""
    _TEXTS[name] = text
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{_slug(name)}.log").write_text(text)


def _saved_text(folder: str | None, name: str) -> str:
    return _TEXTS[name]


def _save(folder: str | None, name: str, reqs: list[Any]) -> None:
    """Keep the measured requests (for refitting offline)."""
    if folder is None:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{_slug(name)}.json").write_text(json.dumps([dataclasses.asdict(r) for r in reqs]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests per workload")
    ap.add_argument("--start-timeout-s", type=float, default=600.0)
    ap.add_argument("--save", help="folder to keep the measured requests in (JSON)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each held-out workload; the prediction is judged against the median run "
        "and the spread shows the measurement's own noise (default 3)",
    )
    sys.exit(main(ap.parse_args()))
