"""Fuzz tierctl's commands with malformed inputs at size; print what happened as it happens.

Two generators (``--generator``): ``mutation`` (tests/fuzzing.py: seeded byte, line and tree
mutations of the bundled examples, alias bombs, deep nesting) and ``schema``
(tests/schema_fuzz.py: documents driven by the schemas themselves, the tier spec's, workload's
and plan's pydantic JSON schemas, the vendored compose schema and the trace formats, with
hostile values set at schema paths: wrong types, huge and non-finite numbers, NUL, rich
markup, 100 KB strings, deep nesting, path escapes); ``both`` alternates them. One input in
32 is given through a special path instead of a regular file (a symlink, a dangling symlink,
a symlink loop, a FIFO, a directory, /dev/zero, /dev/urandom, /dev/null).

Input ``n`` of a stream is rebuilt from ``(generator, seed, n)`` alone
(``tests.schema_fuzz.input_at``), so ``--workers`` (at most 2 on the shared machine) split a
stream by index, and ``--only N`` re-runs one input. Every input is run in process (tierctl's
real ``main``, no subprocess per run) through every command that reads it (``render``,
``show`` and ``show --json``, ``validate`` with and without ``--spec``, ``plan`` both ways,
``runbook``, ``import``, ``compose config``, ``sim run``/``sim compare`` on specs and traces,
``sim run --cost-model``, ``sim fit``, ``rollout --dry-run --plan``, the workload reader and
the bench request planner, the trace reader): tests/fuzzing.py ``commands_for``.

Hangs are caught twice: a budget per run (``--timeout`` CPU seconds by ``SIGPROF``, three
times that in wall time by ``SIGALRM``, so that a loaded machine does not turn a slow run into
a hang), and a watchdog in the parent that kills a worker whose input runs past every run's
wall budget plus 30 s (a hang in C code the alarms cannot interrupt) and starts a new one at
the next input.

Prints a line every ``--every`` inputs (inputs, runs, exceptions, hangs, peak RSS, rate), and
the full figures at the end: the exit-code histogram per command, every distinct unhandled
exception (type, place, count), hangs, peak RSS. Every failing input is written as it is
found (``--save DIR``; by default ``$TMPDIR/tierctl-fuzz-repro/SEED``; ``--no-save``: none):
``DIR/<seed>-<n>-<kind>.<ext>`` and a ``.txt`` beside it (what failed,
and the command that re-runs it). ``--replay FILE --kind KIND`` runs one file.

Run: PYTHONPATH=src python benchmarks/fuzz.py [--count 10000] [--seed 1] [--generator both]
     [--workers 2] [--timeout 20] [--save DIR] [--kinds spec,compose,...] [--tracemalloc]
Exit status: 0 when the goal is met (0 exceptions, 0 hangs, every failure with a message).

Measured figures: docs/fuzzing.md.
"""

from __future__ import annotations

import argparse
import collections
import math
import multiprocessing as mp
import queue
import resource
import signal
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzzing import (  # noqa: E402
    STARVED_CAP,
    WALL_FACTOR,
    Seeds,
    load_seeds,
    run_input,
    runqueue_wait_s,
)
from tests.schema_fuzz import input_at  # noqa: E402
from tests.sweep_fuzz import SWEEP_KINDS, add_seeds  # noqa: E402

#: Where reproducers go unless ``--save DIR`` or ``--no-save`` (one folder per seed).
DEFAULT_SAVE = Path(tempfile.gettempdir()) / "tierctl-fuzz-repro"

_EXT = {"jsonl": "jsonl", "mooncake": "jsonl", "azure": "csv", "burstgpt": "csv"}
_EXT.update({"plan": "json", "steplog": "jsonl", "results": "json", "costmodel": "json"})
_EXT.update({"catalog": "json", "promtext": "prom", "enginelog": "log", "cli": "json"})


def _cpu_s() -> float:
    """CPU seconds this worker and its children (the Compose binary) have used."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _save(
    save: Path | None, args: argparse.Namespace, n: int, kind: str, data: bytes, what: str
) -> None:
    """Write one failing input and what it did (a reproducer)."""
    if save is None:
        return
    save.mkdir(parents=True, exist_ok=True)
    stem = save / f"{args.seed}-{n}-{kind}"
    data_path = stem.with_suffix("." + _EXT.get(kind, "yaml"))
    data_path.write_bytes(data)
    again = (
        f"PYTHONPATH=src python benchmarks/fuzz.py --generator {args.generator} "
        f"--seed {args.seed} --only {n}"
    )
    replay = f"PYTHONPATH=src python benchmarks/fuzz.py --replay {data_path} --kind {kind}"
    # Appended: one input may fail through several commands.
    with stem.with_suffix(".txt").open("a") as fh:
        fh.write(f"{what}\nrebuild and re-run: {again}\nre-run this file: {replay}\n\n")


def _selected(seeds: Seeds, kinds: set[str]) -> Seeds:
    seeds = add_seeds(seeds, seeds.compose_olds[0].parent.parent)
    seeds.by_kind = {k: v for k, v in seeds.by_kind.items() if k in kinds}
    return seeds


def _worker(
    wid: int, indices: list[int], args: argparse.Namespace, results: Any, save: Path | None
) -> None:
    """Generate and run inputs ``indices`` (in order); report each to ``results``."""
    limit = args.memory_limit_mib * 1024 * 1024
    # A run that tries to take more than this gets MemoryError, counted as an exception.
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if args.tracemalloc:
        tracemalloc.start()
    with tempfile.TemporaryDirectory(prefix=f"tierctl-fuzz-{wid}-") as tmp:
        work = Path(tmp)
        seeds = _selected(load_seeds(work), set(args.kinds.split(",")))
        for n in indices:
            results.put(("start", wid, n, time.monotonic()))
            kind, which, data, form = input_at(seeds, args.generator, args.seed, n)
            if args.tracemalloc:
                tracemalloc.reset_peak()
            outcomes = run_input(
                kind, which, data, seeds, work, timeout_s=args.timeout, form=form, full=True
            )
            traced = tracemalloc.get_traced_memory()[1] / 2**20 if args.tracemalloc else 0.0
            rows = []
            for o in outcomes:
                rows.append(
                    (o.command, o.code, o.exception, o.hang, o.ok, o.seconds, o.detail, o.starved_s)
                )
                if not o.ok:
                    what = (
                        f"{kind} (form {form}) through {o.command}: exit {o.code}, exception "
                        f"{o.exception} {o.detail!r}, hang {o.hang}\nstderr: {o.stderr[-2000:]}"
                    )
                    _save(save, args, n, kind, data, what)
            results.put(("done", wid, n, kind, form, rows, _rss_mib(), traced, _cpu_s()))
    results.put(("exit", wid))


@dataclass
class Tally:
    """The figures of a run, as they stream in."""

    inputs: int = 0
    runs: int = 0
    histogram: dict[str, collections.Counter[Any]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    seconds: collections.Counter[str] = field(default_factory=collections.Counter)
    exceptions: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, str] = field(default_factory=dict)
    hangs: list[str] = field(default_factory=list)
    bad_messages: int = 0
    peak_rss: dict[int, float] = field(default_factory=dict)
    # CPU seconds per worker process (a replaced worker's last figure is kept in cpu_done):
    # inputs per CPU second is the harness's own speed, whatever the machine's load.
    cpu_s: dict[int, float] = field(default_factory=dict)
    cpu_done: float = 0.0
    traced_peak: float = 0.0
    slowest: list[tuple[float, str, int]] = field(default_factory=list)
    starved_s: float = 0.0  # seconds runs waited for a CPU others held (not counted to hangs)
    most_starved: tuple[float, float] = (0.0, 0.0)  # (starved, elapsed) of the worst run

    def add(self, n: int, kind: str, form: str | None, rows: list[Any]) -> None:
        """Count one input's runs."""
        self.inputs += 1
        for command, code, exception, hang, ok, seconds, detail, starved in rows:
            self.runs += 1
            self.starved_s += starved
            self.most_starved = max(self.most_starved, (starved, seconds))
            key = f"{kind}:{command}" + (f"@{form}" if form else "")
            self.seconds[key] += seconds
            self.slowest = sorted([*self.slowest, (seconds, key, n)], reverse=True)[:5]
            if hang:
                self.hangs.append(f"{key} input {n}")
                self.histogram[key]["hang"] += 1
            elif exception is not None:
                name = f"{command}: {exception}"
                self.exceptions[name] += 1
                self.examples.setdefault(name, f"input {n} [{kind}] {detail[:120]!r}")
                self.histogram[key]["exc"] += 1
            else:
                self.histogram[key][code] += 1
                if not ok:
                    self.bad_messages += 1
                    if self.bad_messages <= 5:
                        print(f"  no message: {key} exit {code} input {n}", file=sys.stderr)

    def line(self, started: float) -> str:
        """The streaming one-line summary."""
        wall = time.monotonic() - started
        return (
            f"[{wall:6.0f} s] inputs {self.inputs}  runs {self.runs}  exceptions "
            f"{sum(self.exceptions.values())}  hangs {len(self.hangs)}  peak RSS "
            f"{max(self.peak_rss.values(), default=0):.0f} MiB  "
            f"{self.inputs / max(wall, 1e-9):.1f} inputs/s, {self.runs / max(wall, 1e-9):.1f} runs/s, "
            f"{self.inputs / max(self.cpu, 1e-9):.1f} inputs/CPU-s"
        )

    def report(self, started: float, args: argparse.Namespace) -> None:
        """Print the full figures."""
        wall = time.monotonic() - started
        print(f"generator: {args.generator}  seed: {args.seed}  workers: {args.workers}")
        print(f"inputs: {self.inputs}  runs: {self.runs}  wall: {wall:.0f} s")
        print(f"throughput: {self.inputs / wall:.2f} inputs/s, {self.runs / wall:.2f} runs/s")
        print(
            f"CPU: {self.cpu:.0f} s in the workers (with the Compose binary): "
            f"{self.inputs / max(self.cpu, 1e-9):.2f} inputs/CPU-s, "
            f"{self.runs / max(self.cpu, 1e-9):.2f} runs/CPU-s"
        )
        print("exit codes by input kind and command (@form: through a special path):")
        for key in sorted(self.histogram):
            counts = ", ".join(
                f"{code}: {c}" for code, c in sorted(self.histogram[key].items(), key=str)
            )
            print(f"  {key:40s} {counts}  ({self.seconds[key]:.1f} s)")
        print(
            f"unhandled exceptions: {sum(self.exceptions.values())} ({len(self.exceptions)} distinct)"
        )
        for name, count in self.exceptions.most_common():
            print(f"  {count:5d}  {name}  {self.examples[name]}")
        print(
            f"hangs (> {args.timeout:g} s CPU, or {args.timeout * WALL_FACTOR:g} s wall net of "
            f"waiting for a CPU, a run): {len(self.hangs)}"
        )
        for which in self.hangs[:20]:
            print(f"  {which}")
        print(f"failures without a message or with a traceback: {self.bad_messages}")
        peaks = ", ".join(f"{v:.0f}" for _, v in sorted(self.peak_rss.items()))
        print(f"peak RSS per worker: {peaks} MiB")
        worst, of = self.most_starved
        print(
            f"waiting for a CPU: {self.starved_s:.0f} s over all runs; the worst run "
            f"{worst:.1f} s of its {of:.1f} s"
        )
        print("slowest runs: " + "; ".join(f"{k} #{i} {t:.2f} s" for t, k, i in self.slowest))
        if args.tracemalloc:
            print(f"peak traced Python allocations in one input: {self.traced_peak:.0f} MiB")

    @property
    def cpu(self) -> float:
        """CPU seconds the workers have used so far."""
        return self.cpu_done + sum(self.cpu_s.values())

    @property
    def clean(self) -> bool:
        """The goal: no exception, no hang, every failure with a message."""
        return not self.exceptions and not self.hangs and not self.bad_messages


def _hard_limit(args: argparse.Namespace) -> float:
    """Seconds one input may take before the watchdog kills its worker (8 runs at most)."""
    return args.timeout * WALL_FACTOR * 8 + 30.0


def _watch(proc: Any, cur: tuple[int, float, float], args: argparse.Namespace) -> str | None:
    """Why the worker on input ``cur`` (index, start, its run-queue wait then) must be
    replaced, or None: it died (a crash in C, an error of the harness), or its input ran past
    the hard limit in time of its own (elapsed less the time it waited for a CPU others held:
    a starved worker is slow, not hung), or past ``STARVED_CAP`` times it however starved."""
    if not proc.is_alive() and proc.exitcode is not None and proc.exitcode != 0:
        return f"died (exit code {proc.exitcode})"
    elapsed = time.monotonic() - cur[1]
    own = elapsed - max(0.0, runqueue_wait_s(proc.pid) - cur[2])
    if own > _hard_limit(args) or elapsed > _hard_limit(args) * STARVED_CAP:
        return f"ran {elapsed:.0f} s, {own:.0f} s of it not waiting for a CPU"
    return None


def run(args: argparse.Namespace) -> Tally:
    """Run the stream over ``--workers`` processes; stream the summary; return the tally."""
    ctx = mp.get_context("fork")
    results: Any = ctx.Queue()
    indices = list(range(args.start, args.start + args.inputs))
    todo = {w: indices[w :: args.workers] for w in range(args.workers)}
    procs: dict[int, Any] = {}
    current: dict[int, tuple[int, float, float] | None] = {}
    tally = Tally()
    started = time.monotonic()
    seeds_for_save: Seeds | None = None

    def spawn(w: int) -> None:
        procs[w] = ctx.Process(target=_worker, args=(w, todo[w], args, results, args.save))
        procs[w].start()
        current[w] = None

    for w in range(args.workers):
        spawn(w)
    next_line = args.every
    stop = {"why": ""}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["why"] = signal.Signals(signum).name

    # SIGTERM (a `timeout` around the run) or ^C: stop, and still print the figures so far.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = started + args.max_seconds if args.max_seconds else math.inf
    while procs:
        if stop["why"] or time.monotonic() > deadline:
            for w in list(procs):
                procs.pop(w).kill()
            in_flight = sorted(cur[0] for cur in current.values() if cur is not None)
            why = stop["why"] or f"--max-seconds {args.max_seconds:g}"
            print(f"stopped ({why}); inputs in flight, not counted: {in_flight}", flush=True)
            break
        try:
            msg = results.get(timeout=1.0)
        except queue.Empty:
            msg = None
        if msg and msg[0] == "start":
            _, w, n, t = msg
            current[w] = (n, t, runqueue_wait_s(procs[w].pid) if w in procs else 0.0)
        elif msg and msg[0] == "done":
            _, w, n, kind, form, rows, rss, traced, cpu = msg
            tally.cpu_s[w] = cpu
            current[w] = None
            tally.add(n, kind, form, rows)
            tally.peak_rss[w] = max(tally.peak_rss.get(w, 0.0), rss)
            tally.traced_peak = max(tally.traced_peak, traced)
            if tally.inputs >= next_line:
                print(tally.line(started), flush=True)
                next_line += args.every
        elif msg and msg[0] == "exit":
            procs.pop(msg[1]).join()
        for w, cur in list(current.items()):
            # A stop signal reaches the workers too (`timeout` signals its process group): a
            # worker that dies of it then is the stop, not a crash (was counted as one).
            if cur is None or w not in procs or stop["why"]:
                continue
            verdict = _watch(procs[w], cur, args)
            if verdict is None:
                continue
            n = cur[0]
            procs.pop(w).kill()
            tally.cpu_done += tally.cpu_s.pop(w, 0.0)
            tally.inputs += 1
            if verdict.startswith("died"):
                tally.exceptions[f"worker {verdict}"] += 1
                tally.examples.setdefault(f"worker {verdict}", f"input {n}")
            else:
                tally.hangs.append(f"input {n} (worker killed: {verdict})")
            print(f"  watchdog: input {n}: {verdict}; worker {w} replaced", flush=True)
            if args.save is not None:
                if seeds_for_save is None:
                    tmp = Path(tempfile.mkdtemp(prefix="tierctl-fuzz-save-"))
                    seeds_for_save = _selected(load_seeds(tmp), set(args.kinds.split(",")))
                kind, _, data, form = input_at(seeds_for_save, args.generator, args.seed, n)
                _save(args.save, args, n, kind, data, f"{kind} (form {form}): {verdict}")
            # The worker ran its indices in order: the ones after the hang are left.
            todo[w] = [i for i in todo[w] if i > n]
            if todo[w]:
                spawn(w)
            else:
                current.pop(w)
    print(tally.line(started), flush=True)
    tally.report(started, args)
    return tally


def replay(args: argparse.Namespace) -> int:
    """Run one file (``--replay``) as an input of ``--kind``; print every outcome."""
    with tempfile.TemporaryDirectory(prefix="tierctl-fuzz-replay-") as tmp:
        seeds = add_seeds(load_seeds(Path(tmp)), Path(tmp))
        data = args.replay.read_bytes()
        bad = 0
        outcomes = run_input(
            args.kind, 0, data, seeds, Path(tmp), timeout_s=args.timeout, full=True
        )
        for o in outcomes:
            bad += not o.ok
            print(f"{o.command}: exit {o.code} exception {o.exception} hang {o.hang}")
            if not o.ok:
                print(f"  {o.detail}\n  {o.stderr[-2000:]}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", "--inputs", dest="inputs", type=int, default=10_000)
    parser.add_argument("--start", type=int, default=0, help="index of the first input")
    parser.add_argument("--only", type=int, default=None, help="run input N alone")
    parser.add_argument(
        "--generator", choices=["mutation", "schema", "both", "sweep", "all"], default="both"
    )
    parser.add_argument("--workers", type=int, default=1, choices=[1, 2])
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python allocations")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="CPU seconds per run (3x in wall): a hang"
    )
    parser.add_argument("--every", type=int, default=500, help="summary line every N inputs")
    parser.add_argument(
        "--max-seconds", type=float, default=0.0, help="stop after this long, with the figures"
    )
    parser.add_argument(
        "--save",
        type=Path,
        default=DEFAULT_SAVE,
        help=f"write reproducers here (default {DEFAULT_SAVE}/SEED)",
    )
    parser.add_argument("--no-save", action="store_true", help="keep no reproducers")
    parser.add_argument("--kinds", default=",".join(SWEEP_KINDS))
    parser.add_argument("--memory-limit-mib", type=int, default=6144)
    parser.add_argument("--replay", type=Path, default=None, help="run this file alone")
    parser.add_argument("--kind", choices=SWEEP_KINDS, default="spec", help="the kind of --replay")
    args = parser.parse_args()
    if args.replay is not None:
        return replay(args)
    if args.only is not None:
        args.start, args.inputs, args.workers = args.only, 1, 1
    if args.no_save:
        args.save = None
    elif args.save == DEFAULT_SAVE:
        # Never lose a reproducer again (seed 4411931's 10 hangs were found without --save).
        args.save = DEFAULT_SAVE / str(args.seed)
    if args.save is not None:
        print(f"reproducers of every exception and hang: {args.save}/", flush=True)
    tally = run(args)
    return 0 if tally.clean else 1


if __name__ == "__main__":
    sys.exit(main())
