"""Malformed inputs through tierctl's commands, in process: the engine of the fuzz suite.

Used by ``tests/unit/test_fuzz.py`` (a fixed, small budget for CI) and by
``benchmarks/fuzz.py`` (10,000+ inputs, with figures). Every input is a seeded mutation of a
bundled example (specs, compose files, workloads, traces in four formats, plans) or a
hand-built hostile document (alias bombs, deep nesting, huge numbers, bad bytes). Each is run
through the commands that read it; an outcome is the exit code, or the unhandled exception,
or a hang (over the CPU budget, or three times it in wall time: SIGPROF, SIGALRM).

The law: every input ends in exit 0, 1, 2 or 3, a non-zero exit has a message on stderr and no
traceback, and nothing runs past its time budget. ``tests.schema_fuzz`` draws inputs from the
schemas instead; both run through :func:`commands_for`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import resource
import signal
import stat
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: Input kinds, each read by the commands of :data:`COMMANDS`.
KINDS = (
    "spec",
    "compose",
    "workload",
    "jsonl",
    "mooncake",
    "azure",
    "burstgpt",
    "plan",
    "steplog",
    "results",
    "costmodel",
)


class Hang(BaseException):
    """Raised by the alarm when one run exceeds its time budget (BaseException: not caught
    by ``except Exception`` inside tierctl)."""


@dataclass
class Outcome:
    """What one run of one command on one input did."""

    command: str
    code: int | None = None
    stdout: str = ""
    exception: str | None = None  # "Type at file:line" of an unhandled exception
    hang: bool = False
    seconds: float = 0.0
    maxrss_jump_mib: float = 0.0  # how far this run raised the process's peak RSS
    starved_s: float = 0.0  # of ``seconds``, how long it waited for a CPU others held
    stderr: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        """The law holds: exit 0/1/2/3, a message on failure, no traceback."""
        if self.hang or self.exception is not None or self.code not in (0, 1, 2, 3):
            return False
        if self.code != 0 and not (self.stderr.strip() or self.stdout.strip()):
            return False
        return "Traceback (most recent call last)" not in self.stderr


@dataclass
class Seeds:
    """The bundled examples, by kind (the mutation corpus)."""

    by_kind: dict[str, list[bytes]] = field(default_factory=dict)
    #: Per compose seed: the spec it was rendered from (as a path in the work dir).
    compose_specs: list[Path] = field(default_factory=list)
    #: Per compose seed: the unmutated file (OLD of plan/runbook).
    compose_olds: list[Path] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Seeds({ {k: len(v) for k, v in self.by_kind.items()} })"


def load_seeds(work: Path) -> Seeds:
    """The corpus: every bundled example, plus a plan and traces in each format."""
    seeds = Seeds()
    specs = sorted(EXAMPLES.glob("*/tier.yaml"))
    seeds.by_kind["spec"] = [p.read_bytes() for p in specs]
    seeds.by_kind["compose"] = []
    for spec in specs:
        folder = work / spec.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        for f in spec.parent.glob("*.yaml"):
            (folder / f.name).write_bytes(f.read_bytes())
            # A mutated spec is written to the work dir top; its output file sits beside it.
            if f.name != "tier.yaml":
                (work / f.name).write_bytes(f.read_bytes())
                seeds.by_kind["compose"].append(f.read_bytes())
                seeds.compose_specs.append(folder / "tier.yaml")
                seeds.compose_olds.append(folder / f.name)
    small = (EXAMPLES / "small-model" / "compose.yaml").read_bytes()
    seeds.by_kind["workload"] = [p.read_bytes() for p in sorted(EXAMPLES.glob("workloads/*.yaml"))]
    tiny = (EXAMPLES / "workloads" / "traces" / "tiny.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in tiny if line.strip()]
    seeds.by_kind["jsonl"] = ["\n".join(tiny).encode() + b"\n"]
    seeds.by_kind["mooncake"] = [
        "".join(
            json.dumps(
                {
                    "timestamp": int(r["arrival_s"] * 1000),
                    "input_length": r["input_tokens"],
                    "output_length": r["output_tokens"],
                    "hash_ids": list(range(i, i + 3)),
                }
            )
            + "\n"
            for i, r in enumerate(rows)
        ).encode()
    ]
    seeds.by_kind["azure"] = [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            + "".join(
                f"2023-11-16 18:15:{int(r['arrival_s']) % 60:02d}.{i:07d},"
                f"{r['input_tokens']},{r['output_tokens']}\n"
                for i, r in enumerate(rows)
            )
        ).encode()
    ]
    seeds.by_kind["burstgpt"] = [
        (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            + "".join(
                f"{r['arrival_s']},ChatGPT,{r['input_tokens']},{r['output_tokens']},"
                f"{r['input_tokens'] + r['output_tokens']},Conversation log\n"
                for r in rows
            )
        ).encode()
    ]
    # A plan between the small example and a copy whose r2 runs one flag differently.
    old = work / "seed-old.yaml"
    new = work / "seed-new.yaml"
    old.write_bytes(small)
    new.write_text(small.decode().replace("30002", "30012", 1))
    from tierctl.rollout.entrypoints import make_plan

    plan = make_plan(str(old), str(new))
    seeds.by_kind["plan"] = [plan.model_dump_json(indent=2).encode()]
    _sim_fit_seeds(seeds, rows)
    return seeds


def _sim_fit_seeds(seeds: Seeds, rows: list[dict[str, Any]]) -> None:
    """``sim fit``'s inputs: a step log, a bench results file, and a cost model file."""
    from tierctl.results import results_document
    from tierctl.sim.cost import DEFAULT_PRESET, preset
    from tierctl.sim.costfile import cost_model_doc

    steps = [
        {"kind": "prefill", "chunks": [[256 * k, 64 * (k % 2)]], "duration_s": 0.01 * k}
        for k in range(1, 9)
    ] + [
        {"kind": "decode", "batch_size": k, "context_tokens": 900 * k, "duration_s": 0.002 * k}
        for k in range(1, 9)
    ]
    seeds.by_kind["steplog"] = ["".join(json.dumps(x) + "\n" for x in steps).encode()]
    requests = [
        {
            "outcome": "completed",
            "sent_s": r["arrival_s"],
            "input_tokens": r["input_tokens"],
            "output_tokens": r["output_tokens"],
            "ttft_s": 0.05,
            "tpot_s": 0.01,
            "itl_s": [0.01] * max(0, r["output_tokens"] - 1),
        }
        for r in rows
    ]
    run = {"sent": len(rows), "completed": len(rows), "failed": 0, "timed_out": 0}
    doc = results_document("run", "tierctl fuzz", {}, {"run": {**run, "requests": requests}})
    seeds.by_kind["results"] = [json.dumps(doc, indent=1).encode()]
    model = cost_model_doc(preset(DEFAULT_PRESET), {"fitted_on": ["x"], "residuals": {}})
    seeds.by_kind["costmodel"] = [json.dumps(model, indent=1).encode()]


# --------------------------------------------------------------------------- mutation

_INTERESTING = [
    "",
    "~",
    "null",
    "[]",
    "{}",
    "-1",
    "0",
    "1e400",
    "-1e400",
    "NaN",
    ".inf",
    "9" * 5000,
    "1" * 320,
    "true",
    "no",
    "${X:-literal}",
    "${",
    "$",
    "$$",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!reset []",
    "&a [*a]",
    "*undefined",
    '"\\u0000"',
    "'''",
    "[[[[[[",
    "{a: [b: {c",
    "2001-12-14",
    "22:22",
    "-- --output=/tmp/x",
    "git:--output=/tmp/pwn:x",
    "\ud83d\ude00",
    "1e35",
    "0x7fffffffffffffffffff",
]

_BOMB = (
    'lol1: &l1 ["l","l","l","l","l","l","l","l","l"]\n'
    + "".join(f"lol{i}: &l{i} [{','.join(f'*l{i - 1}' for _ in range(9))}]\n" for i in range(2, 10))
).encode()


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    op = rng.randrange(9)
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randrange(1, 64))
    if op == 0:  # flip a byte
        return data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if op == 1:  # delete a span
        return data[:i] + data[j:]
    if op == 2:  # duplicate a span
        return data[:j] + data[i:j] + data[j:]
    if op == 3:  # insert random bytes
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16))) + data[i:]
    if op == 4:  # truncate
        return data[:i]
    if op == 5:  # NUL or invalid UTF-8
        return data[:i] + rng.choice([b"\x00", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"]) + data[i:]
    if op == 6:  # an interesting token
        return data[:i] + rng.choice(_INTERESTING).encode("utf-8", "surrogatepass") + data[i:]
    if op == 7:  # swap two lines
        lines = data.split(b"\n")
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return b"\n".join(lines)
    # re-indent a line
    lines = data.split(b"\n")
    a = rng.randrange(len(lines))
    lines[a] = (b" " * rng.randrange(0, 6)) + lines[a].lstrip(b" ")
    return b"\n".join(lines)


def _replace_value(data: bytes, rng: random.Random) -> bytes:
    """Replace the value of one ``key: value`` line (or one JSON/CSV field) with a hostile one."""
    lines = data.split(b"\n")
    candidates = [k for k, line in enumerate(lines) if b":" in line or b"," in line]
    if not candidates:
        return _mutate_bytes(data, rng)
    k = rng.choice(candidates)
    line = lines[k]
    sep = b": " if b": " in line else (b":" if b":" in line else b",")
    parts = line.split(sep)
    which = rng.randrange(1, len(parts)) if len(parts) > 1 else 0
    parts[which] = rng.choice(_INTERESTING).encode("utf-8", "surrogatepass")
    lines[k] = sep.join(parts)
    return b"\n".join(lines)


def _structural(data: bytes, kind: str, rng: random.Random) -> bytes:
    """Document-level attacks: bombs, deep nesting, wrong top-level shapes, huge repeats."""
    op = rng.randrange(8)
    if op == 0:
        return _BOMB + data
    if op == 1:
        depth = rng.choice([70, 200, 1200, 20000])
        if kind in ("jsonl", "mooncake", "plan", "steplog", "results", "costmodel"):
            return b"[" * depth + b"]" * depth + b"\n" + data
        return b"deep: " + b"[" * depth + b"]" * depth + b"\n" + data
    if op == 2:
        return rng.choice([b"[]", b"- a\n- b\n", b"42\n", b"~\n", b"---\na: 1\n---\nb: 2\n", b""])
    if op == 3:  # a self-referencing anchor
        return b"self: &s\n  again: *s\n" + data
    if op == 4:  # a long line
        return data + b"\nlong: " + b"x" * rng.choice([10_000, 300_000]) + b"\n"
    if op == 5:  # the document as a value of a list where a map belongs
        lines = data.split(b"\n")
        k = rng.randrange(len(lines))
        lines.insert(k, lines[k].split(b":")[0] + b": [1, {a: b}, [c]]")
        return b"\n".join(lines)
    if op == 6:  # a duplicate key
        lines = data.split(b"\n")
        k = rng.randrange(len(lines))
        lines.insert(k, lines[k])
        return b"\n".join(lines)
    # a big number in a numeric-looking place
    return data.replace(b"0", b"9" * rng.choice([30, 400, 5000]), 1)


def _hostile_value(rng: random.Random) -> object:
    choices: list[object] = [
        [],
        {},
        [1, {"a": "b"}, ["c"]],
        {"a": {"b": {"c": [1, 2]}}},
        "",
        "x",
        0,
        -1,
        10**30,
        1e308,
        -1e-308,
        None,
        True,
        "${SECRET_VALUE}",
        "${X:-literal-password}",
        "$",
        "-",
        "--flag",
        "a" * 5000,
        [[[[]]]],
        {"": None},
        {1: 2},
        "\x00",
        "0.0.0.0:99999",
        "r1",
        "qwen-r1",
        ["--port", "1"],
    ]
    return rng.choice(choices)


def _paths(node: object, path: tuple[object, ...] = ()) -> Iterator[tuple[object, ...]]:
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*path, i))


def _tree_edit(doc: object, rng: random.Random) -> object:
    """Replace, delete or add one node of a parsed document."""
    paths = list(_paths(doc))
    target = rng.choice(paths)
    if not target:
        return _hostile_value(rng)
    parent: object = doc
    for part in target[:-1]:
        parent = parent[part]  # type: ignore[index]
    last = target[-1]
    op = rng.random()
    if op < 0.6:
        parent[last] = _hostile_value(rng)  # type: ignore[index]
    elif op < 0.75 and isinstance(parent, dict):
        del parent[last]
    elif op < 0.85 and isinstance(parent, dict):
        parent[rng.choice(["extra", "command", "environment", "labels", "x-tierctl"])] = (
            _hostile_value(rng)
        )
    elif isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))  # type: ignore[index]
    else:
        parent[last] = [parent[last]]  # type: ignore[index]
    return doc


def _tree_mutation(data: bytes, kind: str, rng: random.Random) -> bytes:
    """Parse the seed, edit its tree (wrong shapes, wrong types, hostile values), write it back."""
    import yaml

    if len(data) > 64 * 1024:  # a tree this big came from an earlier bomb or repeat: bytes only
        return _mutate_bytes(data, rng)
    try:
        if kind in ("jsonl", "mooncake", "steplog"):
            lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
            k = rng.randrange(len(lines))
            lines[k] = _tree_edit(lines[k], rng)
            return "".join(json.dumps(x, default=str) + "\n" for x in lines).encode()
        if kind in ("azure", "burstgpt"):
            rows = data.decode().splitlines()
            k = rng.randrange(len(rows))
            cells = rows[k].split(",")
            c = rng.randrange(len(cells))
            cells[c] = str(_hostile_value(rng)).replace("\n", " ")
            rows[k] = ",".join(cells)
            return ("\n".join(rows) + "\n").encode()
        if kind in ("plan", "results", "costmodel"):
            return json.dumps(_tree_edit(json.loads(data), rng), default=str).encode()
        # Parsed bounded: a seed that already carries an alias bomb must not expand here.
        from tierctl.readers import Limits, load_yaml

        doc = load_yaml(data.decode(), "<seed>", limits=Limits(max_nodes=20_000)).data
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(_tree_edit(doc, rng), Dumper=dumper, sort_keys=False).encode()
    except Exception:
        return _mutate_bytes(data, rng)


def mutate(seed: bytes, kind: str, rng: random.Random) -> bytes:
    """One seeded mutation of ``seed`` (1-3 edits: tree edits, bytes, structure)."""
    out = seed
    for _ in range(rng.randrange(1, 4)):
        r = rng.random()
        if r < 0.5:
            out = _tree_mutation(out, kind, rng)
            continue
        r = rng.random()
        if r < 0.45:
            out = _replace_value(out, rng)
        elif r < 0.85:
            out = _mutate_bytes(out, rng)
        else:
            out = _structural(out, kind, rng)
    return out[: 4 * 1024 * 1024]


def inputs(seeds: Seeds, count: int, seed: int) -> Iterator[tuple[str, int, bytes]]:
    """``count`` (kind, seed index, bytes) inputs, reproducible from ``seed``, over every kind."""
    rng = random.Random(seed)
    kinds = [k for k in KINDS if seeds.by_kind.get(k)]
    for n in range(count):
        kind = kinds[n % len(kinds)]
        which = rng.randrange(len(seeds.by_kind[kind]))
        yield kind, which, mutate(seeds.by_kind[kind][which], kind, rng)


# --------------------------------------------------------------------------- running

_SUFFIX = {"jsonl": ".jsonl", "mooncake": ".jsonl", "azure": ".csv", "burstgpt": ".csv"}
_SUFFIX.update({"plan": ".json", "steplog": ".jsonl", "results": ".json", "costmodel": ".json"})
_SUFFIX.update({"catalog": ".json", "promtext": ".txt", "enginelog": ".log", "cli": ".json"})


def _cli(args: list[str]) -> tuple[int, str, str]:
    """Run ``tierctl ARGS`` in process (its real ``main``): exit code, stdout, stderr."""
    from tierctl.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def _lib(fn: Callable[[], object]) -> tuple[int, str, str]:
    """Run a library reader; an InputError/TierctlError is its exit code and message."""
    from tierctl.errors import TierctlError

    try:
        fn()
    except TierctlError as exc:
        return int(exc.exit_code), "", exc.format()
    return 0, "", ""


def commands_for(
    kind: str, which: int, path: Path, seeds: Seeds, work: Path, *, full: bool = False
) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
    """The commands that read an input of ``kind`` (mutated from seed ``which``) at ``path``;
    ``full`` adds the ones whose cost is the work, not the reading (``sim fit --from bench``
    fits for seconds on a valid file): the long run's, not CI's."""
    p = str(path)
    # A small simulated workload: the law is about reading the input, not the simulator's speed.
    small = ["--workload", "burst", "--count", "2", "--input-tokens", "2000"]
    small += ["--output-tokens", "4", "--format", "json"]
    if kind == "spec":
        return [
            ("render", lambda: _cli(["render", p])),
            ("show", lambda: _cli(["show", "--format", "json", p])),
            ("show-text", lambda: _cli(["show", p])),
            ("validate-spec", lambda: _cli(["validate", "--spec", p])),
            ("sim-run-spec", lambda: _cli(["sim", "run", "--spec", p, "--replica", "r1", *small])),
            (
                "sim-compare-spec",
                lambda: _cli(
                    [
                        *("sim", "compare", "--spec", p, "--control-replica", "r1"),
                        *("--candidate-replica", "r2", *small),
                    ]
                ),
            ),
        ]
    if kind == "compose":
        spec = str(seeds.compose_specs[which])
        old = seeds.compose_olds[which]
        return [
            ("validate", lambda: _cli(["validate", p])),
            # The Compose binary's cross-check once per input (plain validate): it is a
            # subprocess, the slowest part of a run.
            (
                "validate-with-spec",
                lambda: _cli(["validate", "--no-compose-binary", "--spec", spec, p]),
            ),
            ("plan", lambda: _cli(["plan", "--from", str(old), "--to", p, "--format", "json"])),
            ("runbook", lambda: _cli(["runbook", "--from", str(old), "--to", p])),
            ("import", lambda: _cli(["import", "--engine", _release(path), p])),
            ("compose-config", lambda: _cli(["compose", "config", "--format", "json", p])),
            (
                "plan-as-old",
                lambda: _cli(["plan", "--from", p, "--to", str(old), "--format", "json"]),
            ),
        ]
    if kind == "workload":
        from tierctl.bench.plan import plan_requests
        from tierctl.bench.workload import load_workload

        return [
            ("load_workload", lambda: _lib(lambda: load_workload(path))),
            ("bench-plan", lambda: _lib(lambda: plan_requests(load_workload(path)))),
        ]
    if kind in ("jsonl", "mooncake", "azure", "burstgpt"):
        from tierctl.traces import read_trace

        return [
            ("read_trace", lambda: _lib(lambda: read_trace(path, kind))),
            (
                "sim-run",
                lambda: _cli(
                    ["sim", "run", "--trace", p, "--trace-format", kind, "--format", "json"]
                ),
            ),
            (
                "sim-compare",
                lambda: _cli(
                    [
                        *(
                            "sim",
                            "compare",
                            "--trace",
                            p,
                            "--trace-format",
                            kind,
                            "--format",
                            "json",
                        ),
                        *("--control", "--chunked-prefill-size 8192"),
                        *("--candidate", "--prefill-decode-interval 2"),
                    ]
                ),
            ),
        ]
    if kind == "plan":
        return [
            (
                "rollout-dry-run",
                lambda: _cli(
                    [
                        "rollout",
                        "--plan",
                        p,
                        "--driver",
                        "local",
                        "--dry-run",
                        "--state-dir",
                        str(work / "state"),
                        "--journal",
                        str(work / "plan.journal.jsonl"),
                    ]
                ),
            ),
        ]
    if kind == "steplog":
        return [
            (
                "sim-fit-steps",
                lambda: _cli(["sim", "fit", p, "--from", "steps", "--format", "json"]),
            )
        ]
    if kind == "results":
        from tierctl.sim.timing_fit import read_bench_requests

        runs = [
            ("read_bench_requests", lambda: _lib(lambda: read_bench_requests(path))),
            ("sim-fit-sniff", lambda: _lib(lambda: _sniff(path))),
        ]
        if full:
            fit = ["sim", "fit", p, "--from", "bench", "--format", "json"]
            runs.append(("sim-fit-bench", lambda: _cli(fit)))
        return runs
    if kind == "costmodel":
        from tierctl.sim.costfile import read_cost_model

        return [
            ("read_cost_model", lambda: _lib(lambda: read_cost_model(path))),
            ("sim-run-cost-model", lambda: _cli(["sim", "run", "--cost-model", p, *small])),
        ]
    from tests.sweep_fuzz import EXTRA_KINDS, extra_commands

    if kind in EXTRA_KINDS:
        return extra_commands(kind, path, seeds, work)
    raise ValueError(kind)


def _release(path: Path) -> str:
    """The --engine of ``import`` for a compose input (the examples pin images by digest)."""
    text = b""
    # Only a regular file is peeked at: a FIFO would block this helper, not the command.
    with contextlib.suppress(OSError, ValueError):
        if stat.S_ISREG(path.stat().st_mode):
            with path.open("rb") as fh:
                text = fh.read(200_000)
    return "vllm==0.32.0" if b"vllm" in text else "sglang==0.5.23"


def _sniff(path: Path) -> str:
    """Which source ``sim fit --from auto`` would read ``path`` as (without fitting)."""
    from tierctl.sim.fitting import FIT_SOURCES

    return next(s.kind for s in FIT_SOURCES if s.recognises(path))


#: A run may take this many times its CPU budget in wall time before it is a hang.
WALL_FACTOR = 3.0


#: A run off the CPU only because others had it may take this many times its wall budget.
STARVED_CAP = 10.0


def runqueue_wait_s(pid: int | str = "self") -> float:
    """Seconds the main thread of ``pid`` has spent runnable but waiting for a CPU (the second
    field of ``/proc/PID/schedstat``): time a loaded machine took from it. 0 where missing."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def children_runqueue_wait_s() -> dict[int, float]:
    """Per live child of this process (the Compose binary a run is waiting on), the seconds it
    has spent runnable but waiting for a CPU: a run blocked on a starved child is slow, not
    hung. Absolute figures: a caller takes off what a child had before the run began."""
    waits: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as fh:
                for pid in fh.read().split():
                    waits[int(pid)] = runqueue_wait_s(pid)
    return waits


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


class _WallBudget:
    """The wall half of a run's budget, net of CPU starvation.

    A run is a hang when it is off the CPU by its own doing (blocked, sleeping) for longer
    than its wall budget: at the alarm, the time its main thread waited on a run queue (it was
    runnable, others had the CPU) is taken off the elapsed time, and the alarm is set again
    for what is left. ``STARVED_CAP`` times the budget is a hang however starved the run was.
    """

    def __init__(self, wall_s: float) -> None:
        self.wall_s = wall_s
        self.t0 = time.monotonic()
        self.q0 = runqueue_wait_s()
        # Children alive before the run (a test's own servers, a pool) are not what it waits
        # on: only their wait since now counts, and a child born later counts from zero.
        self.children0 = children_runqueue_wait_s()
        self.starved_s = 0.0

    def own_s(self) -> float:
        """Elapsed seconds less those spent waiting for a CPU, by this process or by the live
        child it waits on (at load 10 a nice-10 Compose binary waited 60 s: a false hang)."""
        children = sum(
            max(0.0, w - self.children0.get(pid, 0.0))
            for pid, w in children_runqueue_wait_s().items()
        )
        mine = max(0.0, runqueue_wait_s() - self.q0)
        # Kept at its largest: a child's figure is gone once it has exited.
        self.starved_s = max(self.starved_s, mine + children)
        return time.monotonic() - self.t0 - self.starved_s

    def on_alarm(self, signum: int, frame: FrameType | None) -> None:
        own = self.own_s()
        to_cap = self.wall_s * STARVED_CAP - (time.monotonic() - self.t0)
        if own >= self.wall_s or to_cap <= 0:
            raise Hang
        # Never past the cap: a starved figure that keeps growing must not push the check out.
        signal.setitimer(signal.ITIMER_REAL, min(max(0.2, self.wall_s - own), to_cap))


#: What the input path may be instead of a regular file holding the input: a symlink to it,
#: a dangling symlink, a symlink loop, a FIFO with no writer, a directory, character devices
#: (directly or through a symlink). Each must be read as the file or refused with a message.
PATH_FORMS = (
    "symlink",
    "dangling",
    "loop",
    "fifo",
    "dir",
    "devzero",
    "devnull",
    "/dev/zero",
    "/dev/urandom",
)


def _special_path(form: str, path: Path, work: Path) -> Path:
    """The input path in ``form`` (:data:`PATH_FORMS`), made under ``work`` beside ``path``."""
    if form.startswith("/"):
        return Path(form)
    special = work / f"form-input{path.suffix}"
    if special.is_dir() and not special.is_symlink():
        special.rmdir()
    else:
        special.unlink(missing_ok=True)
    if form == "symlink":
        special.symlink_to(path)
    elif form == "dangling":
        special.symlink_to(work / "no-such-file")
    elif form == "loop":
        special.symlink_to(special)
    elif form == "fifo":
        os.mkfifo(special)
    elif form == "dir":
        special.mkdir()
    elif form == "devzero":
        special.symlink_to("/dev/zero")
    elif form == "devnull":
        special.symlink_to("/dev/null")
    else:
        raise ValueError(form)
    return special


def run_input(
    kind: str,
    which: int,
    data: bytes,
    seeds: Seeds,
    work: Path,
    *,
    timeout_s: float = 10.0,
    form: str | None = None,
    full: bool = False,
) -> list[Outcome]:
    """Write ``data`` as an input of ``kind`` and run every command that reads it (through
    the path ``form`` of :data:`PATH_FORMS` when given; ``full``: :func:`commands_for`)."""
    path = work / f"input{_SUFFIX.get(kind, '.yaml')}"
    path.write_bytes(data)
    if form is not None:
        path = _special_path(form, path, work)
    journal = work / "plan.journal.jsonl"
    outcomes: list[Outcome] = []
    for name, fn in commands_for(kind, which, path, seeds, work, full=full):
        journal.unlink(missing_ok=True)
        outcome = Outcome(command=name)
        peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.monotonic()
        # A hang is a run past its CPU budget (a loop), or off the CPU by its own doing for
        # WALL_FACTOR times it (a blocked read): time spent waiting for a CPU others held is
        # not counted (_WallBudget), so a loaded machine does not make a slow run a hang.
        budget = _WallBudget(timeout_s * WALL_FACTOR)
        previous = signal.signal(signal.SIGALRM, budget.on_alarm)
        previous_prof = signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s * WALL_FACTOR)
        signal.setitimer(signal.ITIMER_PROF, timeout_s)
        try:
            code, out, err = fn()
            outcome.code, outcome.stdout, outcome.stderr = code, out, err
        except Hang:
            outcome.hang = True
        except Exception as exc:  # the defect this suite exists to find
            tb = traceback.extract_tb(exc.__traceback__)
            inner = next((f for f in reversed(tb) if "/tierctl/" in f.filename), tb[-1])
            where = f"{Path(inner.filename).name}:{inner.lineno} {inner.name}"
            outcome.exception = f"{type(exc).__name__} at {where}"
            outcome.detail = str(exc)[:300]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGALRM, previous)
            signal.signal(signal.SIGPROF, previous_prof)
            outcome.seconds = time.monotonic() - t0
            budget.own_s()
            outcome.starved_s = budget.starved_s
            peak1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            outcome.maxrss_jump_mib = (peak1 - peak0) / 1024
        outcomes.append(outcome)
    return outcomes


def check_law(
    kind: str,
    which: int,
    data: bytes,
    seeds: Seeds,
    work: Path,
    *,
    timeout_s: float,
    form: str | None = None,
) -> None:
    """Assert the law for one input through every command that reads it (tests' helper)."""
    for outcome in run_input(kind, which, data, seeds, work, timeout_s=timeout_s, form=form):
        assert outcome.ok, (
            f"{kind} through {outcome.command}: exit {outcome.code}, "
            f"exception {outcome.exception} {outcome.detail!r}, hang {outcome.hang}, "
            f"stderr {outcome.stderr[-500:]!r}; input {data[:300]!r}"
        )


def main_thread_only() -> None:
    """The alarm needs the main thread (pytest-xdist workers and scripts run there)."""
    import threading

    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        raise RuntimeError("fuzzing runs in the main thread (it uses SIGALRM)")


__all__ = [
    "KINDS",
    "PATH_FORMS",
    "STARVED_CAP",
    "WALL_FACTOR",
    "Hang",
    "Outcome",
    "Seeds",
    "check_law",
    "commands_for",
    "inputs",
    "load_seeds",
    "main_thread_only",
    "mutate",
    "run_input",
    "runqueue_wait_s",
]

if __name__ == "__main__":  # pragma: no cover
    sys.exit("run benchmarks/fuzz.py")
