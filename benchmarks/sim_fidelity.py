"""Does the simulator predict a real engine? Fit on one workload, predict four others.

Run: PYTHONPATH=src /work/main/.venv/bin/python benchmarks/sim_fidelity.py [--quick]

Starts one real vLLM engine on CPU (the tiny Llama, via tierctl.realengine; scripts/ensure-vllm
installs it) on a loopback port and always stops it. Fits a cost model from the request timings
of one Poisson workload (``tierctl sim fit --from bench``'s method), then plays a burst, a
Poisson hammer, long prompts arriving while requests decode, and the bundled tiny trace, and
prints predicted against measured TTFT p50/p90, TPOT p50 and ITL p90 with the error. Every loop
is bounded (fixed request counts, per-request time-outs).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("--max-num-seqs", "8", "--max-num-batched-tokens", "512")


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from tierctl.realengine.engine import BASE_FLAGS, SERVED_NAME, VllmEngine
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.cost import DENSE_8B_H100
    from tierctl.sim.fidelity import (
        PlannedSend,
        burst_plan,
        compare_figures,
        decoders_and_long_plan,
        measure,
        poisson_plan,
        predict,
    )
    from tierctl.sim.fitting import fit_timings

    q = args.quick
    rng = random.Random(0)
    fit_plan = poisson_plan(rng, 2.0, 16 if q else 40, (32, 2000), (16, 96))
    trace = [json.loads(line) for line in (ROOT / "examples/workloads/traces/tiny.jsonl").open()]
    trace_plan = [
        PlannedSend(t["arrival_s"], min(t["input_tokens"], 3000), min(t["output_tokens"], 64))
        for t in trace
    ]
    plans = {
        "burst 8 x 1500": burst_plan(8, 1500, 48),
        "Poisson hammer": poisson_plan(rng, 5.0, 20 if q else 60, (32, 256), (16, 64)),
        "long prompts + decoders": decoders_and_long_plan(3, 3, 3000, 1.0),
        "trace (tiny.jsonl)": trace_plan,
    }
    config = EngineConfig.from_argv(
        ["vllm", "serve", "tiny", *BASE_FLAGS, *FLAGS, "--num-gpu-blocks-override", "65536"]
    )
    base = dataclasses.replace(DENSE_8B_H100, name="cpu-start", kv_pool_tokens=1_000_000)
    logdir = Path(tempfile.mkdtemp(prefix="sim-fidelity-"))
    with VllmEngine(logdir / "vllm.log", flags=FLAGS, name="fidelity") as engine:
        engine.start()
        started = engine.wait_ready(args.start_timeout_s)
        print(f"vLLM CPU engine ready in {started:.0f} s ({engine.url}, flags {' '.join(FLAGS)})")
        url = engine.url
        asyncio.run(measure(url, SERVED_NAME, burst_plan(2, 64, 8)))  # warm-up, not measured
        t = time.perf_counter()
        fit_on = asyncio.run(measure(url, SERVED_NAME, fit_plan, seed=1))
        _save(args.save, "fit", fit_on)
        model, res = fit_timings(fit_on, base, config, name="fitted:vllm-cpu-tiny")
        print(f"fitted on {len(fit_on)} Poisson requests in {time.perf_counter() - t:.0f} s: "
              f"residual TTFT median {res['ttft_median_abs_rel_error']:.1%}, "
              f"TPOT median {res['tpot_median_abs_rel_error']:.1%}")  # fmt: skip
        for f in ("prefill_base_s", "prefill_per_token_s", "prefill_attn_pair_s",
                  "decode_base_s", "decode_per_seq_s", "decode_per_ctx_token_s"):  # fmt: skip
            print(f"  {f:<24}{getattr(model, f):.4g}")
        worst = 0.0
        for name, plan in plans.items():
            got = asyncio.run(measure(url, SERVED_NAME, plan, seed=2))
            _save(args.save, name, got)
            rows = compare_figures(got, predict(got, config, model))
            print(f"\n{name} ({len(got)} requests)")
            print(f"  {'figure':<10}{'measured':>12}{'predicted':>12}{'error':>9}")
            for r in rows:
                err = "-" if r.error is None else f"{r.error:+.0%}"
                m = "-" if r.measured_s is None else f"{r.measured_s * 1000:.1f} ms"
                p = "-" if r.predicted_s is None else f"{r.predicted_s * 1000:.1f} ms"
                print(f"  {r.metric:<10}{m:>12}{p:>12}{err:>9}")
                if r.error is not None:
                    worst = max(worst, abs(r.error))
        print(f"\nworst error {worst:.0%} (goal: within 15 %); engine log {logdir / 'vllm.log'}")
    return 0


def _save(folder: str | None, name: str, reqs: list[Any]) -> None:
    """Keep the measured requests (for refitting offline)."""
    if folder is None:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in name)
    (out / f"{slug}.json").write_text(json.dumps([dataclasses.asdict(r) for r in reqs]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests per workload")
    ap.add_argument("--start-timeout-s", type=float, default=600.0)
    ap.add_argument("--save", help="folder to keep the measured requests in (JSON)")
    sys.exit(main(ap.parse_args()))
