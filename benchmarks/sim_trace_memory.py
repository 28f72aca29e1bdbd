"""Peak memory of `tierctl sim run --trace` on big traces: streamed vs held in memory.

Writes a Mooncake trace of about ``--mb`` MB (rows ~290 bytes: one arrival every 0.4 s on
average, prompts of 1-16 blocks whose hashes share 300 prefixes, as the real trace's do), then
runs, each in its own process, and prints every figure:

* ``sim run --trace T`` (the summary only: the streamed path, tierctl.sim.streaming),
* ``sim run --trace T --per-request`` (every request printed: the in-memory path), unless
  ``--no-baseline``,
* the reader alone (``read_trace``), for scale.

Per run: peak RSS (the child's ru_maxrss), CPU seconds, wall seconds, and whether the two
paths printed the same summary lines.

Run: PYTHONPATH=src python benchmarks/sim_trace_memory.py [--mb 100] [--no-baseline]
     [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_trace(path: Path, mb: float, seed: int = 1) -> int:
    """A Mooncake trace of about ``mb`` MB; the number of rows."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1 << 40) for _ in range(8)] for _ in range(300)]
    target = int(mb * 1_000_000)
    written = rows = 0
    t_ms = 0
    next_id = 1 << 41
    with path.open("w") as fh:
        while written < target:
            t_ms += int(rng.expovariate(1 / 400))
            blocks = rng.randint(1, 16)
            shared = prefixes[rng.randrange(300)][: rng.randint(0, min(8, blocks))]
            tail = list(range(next_id, next_id + blocks - len(shared)))
            next_id += len(tail)
            line = json.dumps(
                {
                    "timestamp": t_ms,
                    "input_length": blocks * 512 - rng.randrange(256),
                    "output_length": rng.randint(16, 400),
                    "hash_ids": shared + tail,
                }
            )
            fh.write(line + "\n")
            written += len(line) + 1
            rows += 1
    return rows


def _run(code: str) -> tuple[float, float, float, str]:
    """Run ``code`` in a fresh interpreter: (peak RSS MiB, CPU s, wall s, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: each run is measured by
    # reading its own peak from /proc at exit instead (printed by the child).
    peak = float(proc.stderr.strip().splitlines()[-1].split()[-1])
    return peak, cpu, wall, proc.stdout


_PEAK = (
    "import resource, sys; "
    "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr)"
)


def _cli(trace: Path, *extra: str) -> str:
    argv = ["sim", "run", "--trace", str(trace), "--trace-format", "mooncake", *extra]
    return (
        "import contextlib, io, sys\n"
        "from tierctl.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "lines = out.getvalue().splitlines()\n"
        "print('\\n'.join(lines[:8]))\n" + _PEAK
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--no-baseline", action="store_true", help="skip the in-memory run")
    parser.add_argument("--keep", type=Path, default=None, help="write the trace here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierctl-trace-mem-") as tmp:
        trace = args.keep or Path(tmp) / "trace.jsonl"
        rows = write_trace(trace, args.mb)
        size = trace.stat().st_size / 1e6
        print(f"trace: {size:.0f} MB, {rows:,} rows (Mooncake format)", flush=True)
        runs = {"streamed (sim run --trace)": _cli(trace)}
        if not args.no_baseline:
            runs["in memory (sim run --trace --per-request)"] = _cli(trace, "--per-request")
        reader = (
            "from tierctl.traces import read_trace\n"
            f"rows = read_trace({str(trace)!r}, 'mooncake')\n" + _PEAK
        )
        runs["reader alone (read_trace)"] = reader
        summaries = {}
        for name, code in runs.items():
            peak, cpu, wall, out = _run(code)
            summaries[name] = out.strip().splitlines()
            print(f"{name:44s} peak RSS {peak:7.0f} MiB  CPU {cpu:7.1f} s  wall {wall:7.1f} s")
        outs = [v for k, v in summaries.items() if k.startswith(("streamed", "in memory"))]
        if len(outs) == 2:
            print(f"same summary lines: {outs[0] == outs[1]}")
        if outs:
            print("\n".join(outs[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
