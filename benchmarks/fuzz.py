"""Fuzz tierctl's commands with malformed inputs; print what happened.

Two generators (``--generator``): ``mutation`` (tests/fuzzing.py: seeded byte, line and tree
mutations of the bundled examples, alias bombs, deep nesting) and ``schema``
(tests/schema_fuzz.py: documents driven by the schemas themselves, the tier spec's, workload's
and plan's pydantic JSON schemas, the vendored compose schema and the trace formats, with
hostile values set at schema paths: wrong types, huge and non-finite numbers, NUL, rich
markup, 100 KB strings, deep nesting, path escapes); ``both`` alternates them. Every input is
run in process through the commands that read it (``render``, ``show`` and ``show --json``,
``validate`` with and without ``--spec``, ``plan``, ``runbook``, ``import``, ``sim run`` and
``sim compare`` on specs and traces, ``rollout --dry-run --plan``, the workload reader and the
bench request planner, the trace reader). The goal (issues #14, #22): 0 unhandled exceptions
and 0 hangs, memory bounded.

Prints: inputs tried, runs, the exit-code histogram per command, every distinct unhandled
exception (type, place, count, a reproducer saved under --save), hangs, peak RSS, the largest
RSS growth over one input, and with ``--tracemalloc`` the peak of Python allocations in one run.

Run: PYTHONPATH=src python benchmarks/fuzz.py [--count 10000] [--seed 1] [--generator both]
     [--timeout 10] [--save DIR] [--kinds spec,compose,...] [--tracemalloc]
Exit status: 0 when the goal is met, 1 otherwise.

Measured 2026-12-01 on the shared 2-core machine (load average 5-9, ``nice -n 10``), the
default 10 s hang budget and 6 GiB address-space limit, mutation generator: seed 3, 10,000
inputs, 21,250 runs, 0 unhandled exceptions, 0 hangs, peak RSS 119 MiB; seed 1, 10,000
inputs, 21,250 runs, 0 / 0 / 0, peak RSS 120 MiB. Schema generator figures: docs/hostile-input.md.
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzzing import KINDS, Seeds, inputs, load_seeds, main_thread_only, run_input  # noqa: E402
from tests.schema_fuzz import hostile_inputs  # noqa: E402


def _stream(seeds: Seeds, count: int, seed: int, generator: str):  # type: ignore[no-untyped-def]
    """The inputs of one generator, or of both interleaved (each seeded by ``seed``)."""
    if generator == "mutation":
        yield from inputs(seeds, count, seed)
        return
    if generator == "schema":
        yield from hostile_inputs(seeds, count, seed)
        return
    a = inputs(seeds, (count + 1) // 2, seed)
    b = hostile_inputs(seeds, count // 2, seed)
    for pair in zip(a, b, strict=False):
        yield from pair
    yield from a


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * resource.getpagesize() / 1024 / 1024
    except OSError:
        return 0.0


def report(
    tried,
    runs,
    started,
    args,
    histogram,
    seconds,
    exceptions,
    examples,
    hangs,
    bad_messages,
    worst_growth,
    slowest,
    jumps,
):  # type: ignore[no-untyped-def]
    """Print the figures so far."""
    elapsed = time.monotonic() - started
    print(f"inputs tried: {tried}  runs: {runs}  seed: {args.seed}  wall: {elapsed:.0f} s")
    print("exit codes by input kind and command:")
    for key in sorted(histogram):
        counts = ", ".join(f"{code}: {c}" for code, c in sorted(histogram[key].items(), key=str))
        print(f"  {key:34s} {counts}  ({seconds[key]:.1f} s)")
    print(f"unhandled exceptions: {sum(exceptions.values())} ({len(exceptions)} distinct)")
    for name, count in exceptions.most_common():
        kind, _data, detail = examples[name]
        print(f"  {count:5d}  {name}  [{kind}] {detail[:120]!r}")
    print(f"hangs (> {args.timeout:g} s): {len(hangs)}")
    for key, which in hangs[:20]:
        print(f"  {key} {which}")
    print(f"failures without a message or with a traceback: {bad_messages}")
    print(f"peak RSS: {_rss_mib():.0f} MiB; largest growth over one input: {worst_growth:.0f} MiB")
    print("slowest runs: " + "; ".join(f"{k} #{i} {t:.2f} s" for t, k, i in slowest))
    if jumps:
        print(
            "runs that raised peak RSS by > 50 MiB: "
            + "; ".join(f"{k} #{i} +{m:.0f} MiB" for m, k, i in jumps)
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", "--inputs", dest="inputs", type=int, default=10_000)
    parser.add_argument("--generator", choices=["mutation", "schema", "both"], default="both")
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace Python allocations (slower)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per run (a hang)")
    parser.add_argument("--save", type=Path, default=None, help="write reproducers here")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--memory-limit-mib", type=int, default=6144)
    args = parser.parse_args()
    main_thread_only()
    # A run that tries to take more than this gets MemoryError, counted as an exception.
    limit = args.memory_limit_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    histogram: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    exceptions: collections.Counter[str] = collections.Counter()
    examples: dict[str, tuple[str, bytes, str]] = {}
    hangs: list[tuple[str, str]] = []
    bad_messages = 0
    runs = 0
    tried = 0
    worst_growth = 0.0
    seconds: collections.Counter[str] = collections.Counter()
    slowest: list[tuple[float, str, int]] = []
    jumps: list[tuple[float, str, int]] = []
    kinds = set(args.kinds.split(","))
    traced_peak = 0.0
    if args.tracemalloc:
        tracemalloc.start()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tierctl-fuzz-") as tmp:
        work = Path(tmp)
        seeds = load_seeds(work)
        seeds.by_kind = {k: v for k, v in seeds.by_kind.items() if k in kinds}
        stream = _stream(seeds, args.inputs, args.seed, args.generator)
        for n, (kind, which, data) in enumerate(stream, 1):
            before = _current_rss_mib()
            if args.tracemalloc:
                tracemalloc.reset_peak()
            outcomes = run_input(kind, which, data, seeds, work, timeout_s=args.timeout)
            if args.tracemalloc:
                traced_peak = max(traced_peak, tracemalloc.get_traced_memory()[1] / 1024 / 1024)
            worst_growth = max(worst_growth, _current_rss_mib() - before)
            tried += 1
            for o in outcomes:
                runs += 1
                key = f"{kind}:{o.command}"
                seconds[key] += o.seconds
                slowest = sorted([*slowest, (o.seconds, key, n)], reverse=True)[:5]
                if o.maxrss_jump_mib > 50:
                    jumps = sorted([*jumps, (o.maxrss_jump_mib, key, n)], reverse=True)[:5]
                if o.hang:
                    hangs.append((key, f"input {n}"))
                    histogram[key]["hang"] += 1  # type: ignore[index]
                elif o.exception is not None:
                    exceptions[f"{o.command}: {o.exception}"] += 1
                    examples.setdefault(f"{o.command}: {o.exception}", (kind, data, o.detail))
                    histogram[key]["exc"] += 1  # type: ignore[index]
                else:
                    histogram[key][o.code] += 1  # type: ignore[index]
                    if not o.ok:
                        bad_messages += 1
                        if bad_messages <= 5:
                            print(f"  no message: {key} exit {o.code}", file=sys.stderr)
            if n % 1000 == 0 and n < args.inputs:
                report(
                    tried,
                    runs,
                    started,
                    args,
                    histogram,
                    seconds,
                    exceptions,
                    examples,
                    hangs,
                    bad_messages,
                    worst_growth,
                    slowest,
                    jumps,
                )
                print(
                    f"  {n} inputs, {runs} runs, {sum(exceptions.values())} exceptions, "
                    f"{len(hangs)} hangs, {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    report(
        tried,
        runs,
        started,
        args,
        histogram,
        seconds,
        exceptions,
        examples,
        hangs,
        bad_messages,
        worst_growth,
        slowest,
        jumps,
    )
    if args.save and examples:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, (name, (kind, data, _)) in enumerate(examples.items()):
            (args.save / f"{i:03d}-{kind}.bin").write_bytes(data)
            (args.save / f"{i:03d}-{kind}.txt").write_text(name + "\n")
    if args.tracemalloc:
        print(f"peak traced Python allocations in one input: {traced_peak:.0f} MiB")
    print(f"generator: {args.generator}")
    return 0 if not exceptions and not hangs and not bad_messages else 1


if __name__ == "__main__":
    sys.exit(main())
