"""The simulator's SGLang scheduler against the real SGLang 0.5.23 scheduler, step by step.

Run: PYTHONPATH=src .venv/bin/python benchmarks/sglang_scheduler_steps.py [--pdi 0,1,2,8]
     [--requests N] [--chunk C] [--max-running R] [--out FILE]

For each ``--prefill-decode-interval`` value one real SGLang is started (CPU, the tiny model,
``--decode-log-interval 1`` so the scheduler logs every step, ``--chunked-prefill-size C``,
``--max-running-requests R``), then one ``/generate`` carries N requests at once (token-id
prompts of seeded lengths, each starting with its own token so none shares a prefix with
another; ``max_new_tokens`` seeded, ``ignore_eos``). The scheduler's ``Prefill batch`` and
``Decode batch`` lines after that request are the real steps: ``P(seqs, new tokens)`` and
``D(running)``. The same N requests, all arriving at 0, go through the simulator's scheduler
(:func:`tierctl.sim.engine.make_scheduler` on the same argv) and give its steps. The two
sequences are compared position by position; the first difference and the counts are printed.
Timing plays no part (the model's decisions here depend on the queue, the chunk, the running
cap and the interval, not on durations). One engine at a time, each stopped before the next.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tierctl.realengine import env as realenv
from tierctl.realengine import sglang as realsglang
from tierctl.runtime.polling import wait_until
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import DENSE_8B_H100
from tierctl.sim.engine import make_scheduler
from tierctl.sim.workload import SimRequest

_PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+)")
_DECODE = re.compile(r"Decode batch, #running-req: (\d+), #token: (\d+)")

Step = tuple[str, int, int]  # ("P", seqs, new tokens) | ("D", running, 0)


@dataclass(frozen=True)
class Workload:
    """N requests: prompt token ids and output lengths."""

    prompts: list[list[int]]
    outputs: list[int]


def workload(n: int, seed: int, lo: int, hi: int, out_lo: int, out_hi: int) -> Workload:
    """Seeded prompts (first token 100 + i: no shared prefix) and output lengths."""
    rnd = random.Random(seed)
    prompts = []
    for i in range(n):
        length = rnd.randint(lo, hi)
        prompts.append([100 + i, *(rnd.randint(10, 2047) for _ in range(length - 1))])
    return Workload(prompts, [rnd.randint(out_lo, out_hi) for _ in range(n)])


def real_steps(flags: list[str], load: Workload, workdir: Path, name: str) -> list[Step]:
    """Start one SGLang with ``flags``, send the workload as one batch, read its steps."""
    python = realsglang.sglang_python()
    assert python is not None
    log = workdir / f"{name}.log"
    with realsglang.SglangEngine(
        log, flags=flags, python=python, model=realenv.tiny_model(python), name=name
    ) as engine:
        engine.start()
        engine.wait_ready(600)
        # /health answers before the server's own warm-up request is done: its steps would
        # count as the workload's. The server logs this line once the warm-up finished.
        ready = "The server is fired up and ready to roll!"
        if not wait_until(lambda: ready in log.read_text(errors="replace"), 300):
            raise RuntimeError(f"{name}: the server's warm-up did not finish")
        # SGLang 0.5.23's /health runs a one-token generation when the server is idle (a
        # `Prefill batch, #new-seq: 1, #new-token: 1` line): the readiness probe's last one
        # must be in the log before the workload's steps are read from it.
        time.sleep(2.0)
        start = len(log.read_bytes())
        body = {
            "input_ids": load.prompts,
            "sampling_params": [
                {"max_new_tokens": o, "temperature": 0.0, "ignore_eos": True} for o in load.outputs
            ],
        }
        resp = httpx.post(engine.url + "/generate", json=body, timeout=600)
        resp.raise_for_status()
        got = [r["meta_info"]["completion_tokens"] for r in resp.json()]
        assert got == load.outputs, (got, load.outputs)
        # The scheduler logs a decode round after it has streamed the round's tokens out: the
        # answer can arrive before the last round's line is written.
        time.sleep(2.0)
        text = log.read_bytes()[start:].decode(errors="replace")
    steps: list[Step] = []
    for line in text.splitlines():
        if m := _PREFILL.search(line):
            steps.append(("P", int(m[1]), int(m[2])))
        elif m := _DECODE.search(line):
            steps.append(("D", int(m[1]), 0))
    return steps


def sim_steps(flags: list[str], load: Workload) -> list[Step]:
    """The simulator's steps for the same argv and requests, all arriving at 0."""
    config = EngineConfig.from_argv(["python3", "-m", "sglang.launch_server", *flags])
    sched = make_scheduler(config, DENSE_8B_H100)
    for i, (p, o) in enumerate(zip(load.prompts, load.outputs, strict=True)):
        sched.submit(
            SimRequest(rid=f"r{i}", arrival_s=0.0, input_tokens=len(p), output_tokens=o), 0.0
        )
    now = 0.0
    steps: list[Step] = []
    for _ in range(100_000):
        r = sched.step(now)
        if r is None:
            break
        now += r.duration_s
        if r.kind == "prefill":
            steps.append(("P", len(r.chunks), sum(c[0] for c in r.chunks)))
        elif r.kind == "decode":
            steps.append(("D", r.batch_size, 0))
        elif r.kind == "mixed":
            steps.append(("M", len(r.chunks), r.batch_size))
    return steps


def compare(real: list[Step], sim: list[Step]) -> dict[str, object]:
    """Position-by-position: mismatches, the first one, both lengths, and kinds counted."""
    diffs = [i for i in range(max(len(real), len(sim))) if real[i : i + 1] != sim[i : i + 1]]
    first = diffs[0] if diffs else None
    return {
        "real_steps": len(real),
        "sim_steps": len(sim),
        "mismatches": len(diffs),
        "first_mismatch": first,
        "real_around": real[max(0, (first or 0) - 3) : (first or 0) + 4] if diffs else [],
        "sim_around": sim[max(0, (first or 0) - 3) : (first or 0) + 4] if diffs else [],
        "real_prefills": sum(1 for s in real if s[0] == "P"),
        "sim_prefills": sum(1 for s in sim if s[0] == "P"),
    }


def main() -> None:
    """Every interval value: real and simulated steps, compared."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdi", default="0,1,2,8")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--max-running", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--extra", default="", help="More engine flags, space-separated (both sides)."
    )
    args = parser.parse_args()
    if realsglang.sglang_python() is None:
        sys.exit(f"SGLang is not installed at {realsglang.venv_dir()}: run scripts/ensure-sglang")
    load = workload(args.requests, args.seed, 40, 600, 4, 24)
    results = []
    with tempfile.TemporaryDirectory(prefix="sglang-steps-") as tmp:
        for pdi in (int(v) for v in args.pdi.split(",")):
            flags = [
                "--chunked-prefill-size", str(args.chunk),
                "--max-running-requests", str(args.max_running),
                "--prefill-decode-interval", str(pdi),
                "--decode-log-interval", "1",
                *args.extra.split(),
            ]  # fmt: skip
            real = real_steps(flags, load, Path(tmp), f"pdi{pdi}")
            sim = sim_steps([*flags, "--max-total-tokens", "65536"], load)
            row = {"pdi": pdi, "flags": flags, **compare(real, sim), "real": real, "sim": sim}
            results.append(row)
            print(
                f"pdi {pdi}: {row['mismatches']} mismatches over {row['real_steps']} real / "
                f"{row['sim_steps']} simulated steps (prefills {row['real_prefills']} / "
                f"{row['sim_prefills']}); first at {row['first_mismatch']}: real "
                f"{row['real_around']} sim {row['sim_around']}",
                flush=True,
            )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
