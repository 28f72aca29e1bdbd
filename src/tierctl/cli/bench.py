"""``tierctl bench``: load-test one endpoint (``run``) or two in a paired A/B (``ab``).

``bench ab``'s options reach its body as one frozen :class:`AbArgs` (``cli.options.into``;
tests/unit/cli/test_option_args.py checks every option has its field).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from tierctl.cli.options import OptionArgs, into, output_option
from tierctl.engines import kinds
from tierctl.errors import ExitCode, label_params
from tierctl.traces import TRACE_FORMATS

_F = Callable[..., Any]


def _workload_options(f: _F) -> _F:
    options = [
        click.option(
            "--workload",
            "workload_path",
            type=click.Path(dir_okay=False),
            help="Workload YAML file (see docs/bench.md).",
        ),
        click.option("--burst", help="Burst lane COUNTxTOKENS, e.g. 8x20000."),
        click.option(
            "--output-tokens",
            type=int,
            default=256,
            show_default=True,
            help="max_tokens of burst requests.",
        ),
        click.option("--hammer-rate", type=float, help="Hammer lane: requests/s (Poisson)."),
        click.option(
            "--hammer-constant", is_flag=True, help="Constant instead of Poisson arrivals."
        ),
        click.option("--hammer-concurrency", type=int, help="Hammer lane: fixed concurrency."),
        click.option(
            "--hammer-count",
            type=int,
            default=100,
            show_default=True,
            help="Hammer lane: requests at most.",
        ),
        click.option("--hammer-duration", type=float, help="Hammer lane: seconds at most."),
        click.option(
            "--hammer-tokens",
            default="64:16",
            show_default=True,
            help="Hammer request INPUT:OUTPUT tokens.",
        ),
        click.option(
            "--trace",
            "trace_path",
            type=click.Path(dir_okay=False),
            help="Trace lane: file to replay.",
        ),
        click.option(
            "--trace-format",
            default="jsonl",
            show_default=True,
            type=click.Choice(TRACE_FORMATS),
        ),
        click.option(
            "--time-scale",
            type=float,
            default=1.0,
            show_default=True,
            help="Multiply trace inter-arrival times (0.5 = twice as fast).",
        ),
        click.option("--api", type=click.Choice(["chat", "completions"]), help="API to call."),
        click.option("--model", help="Model name (default: first of /v1/models)."),
        click.option("--seed", type=int, help="Seed of arrivals and prompts."),
        click.option("--timeout", "timeout_s", type=float, help="Per-request timeout, s."),
        click.option(
            "--max-duration",
            "max_duration_s",
            type=float,
            help="Hard bound on a run's wall time, s.",
        ),
        click.option("--probe", "probe", help="Probe PATH[@INTERVAL] (default /health@1s)."),
        click.option("--no-probe", is_flag=True, help="Do not run the probe lane."),
        click.option(
            "--tokenizer",
            type=click.Path(dir_okay=False),
            help="tokenizer.json to size prompts with, or `sim` for the simulator's "
            "(default: bundled words).",
        ),
        output_option(
            "out_dir",
            folder=True,
            path_type=str,
            help="Write results.json, report.md and PNG plots here.",
        ),
        click.option("--no-plots", is_flag=True, help="Skip the PNG plots."),
        click.option(
            "--realtime",
            is_flag=True,
            help="Run the client's event loop real-time (SCHED_FIFO; root or CAP_SYS_NICE): "
            "on a busy host its tokens are then stamped when they land (docs/bench.md).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _workload(opts: Mapping[str, Any]) -> Any:
    from tierctl.bench.flags import WorkloadFlags, workload_from_flags

    names = WorkloadFlags.__dataclass_fields__
    return workload_from_flags(WorkloadFlags(**{k: v for k, v in opts.items() if k in names}))


@contextlib.contextmanager
def _client_priority(opts: Mapping[str, Any], console: Console) -> Iterator[None]:
    """The client real-time for the block when ``--realtime`` asked (and a note when it
    could not be: the run goes on at ordinary priority)."""
    if not opts.get("realtime"):
        yield
        return
    from tierctl.bench.clientcheck import realtime

    with realtime() as why:
        if why is not None:
            console.print(f"[yellow]note:[/yellow] --realtime: {escape(why)}")
        yield


def _console() -> Console:
    probe = Console()
    # Tables are wide; when piped, do not squeeze them into rich's 80-column default, unless
    # COLUMNS says how wide the output is (the tables fit any width without cutting figures).
    if probe.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return probe
    return Console(width=200)


def _health_options(f: _F) -> _F:
    options = []
    for arm in ("a", "b"):
        up = arm.upper()
        options += [
            click.option(
                f"--{arm}-log",
                type=click.Path(dir_okay=False),
                help=f"Arm {up}'s engine log file (fatal lines written during the run).",
            ),
            click.option(
                f"--{arm}-container", help=f"Arm {up}'s container (docker inspect / logs)."
            ),
            click.option(
                f"--{arm}-pid-file",
                type=click.Path(dir_okay=False),
                help=f"File holding arm {up}'s engine pid (its start time tells restarts).",
            ),
        ]
    options += [
        click.option(
            "--engine",
            type=click.Choice(["auto", *kinds()]),
            default="auto",
            show_default=True,
            help="Engine of both arms (fatal log patterns, logprob request shape).",
        ),
        click.option(
            "--health-interval",
            "health_interval_s",
            type=click.FloatRange(min=0.1),
            default=5.0,
            show_default=True,
            help="Seconds between arm-health samples.",
        ),
        click.option(
            "--fail-on-unhealthy",
            is_flag=True,
            help="Exit 1 when an arm restarted, was OOM-killed, logged a fatal line or was "
            "down at the end.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _quality_options(f: _F) -> _F:
    options = [
        click.option("--texts", type=int, help="Generated texts scored teacher-forced (24)."),
        click.option("--text-tokens", type=int, help="Tokens per generated text (96)."),
        click.option(
            "--texts-file",
            type=click.Path(dir_okay=False),
            help='JSONL of {"text"} or {"prompt","reference"} to score instead.',
        ),
        click.option(
            "--passkey", "passkey_lengths", help="Passkey context lengths, e.g. 512,4096."
        ),
        click.option("--passkey-per-length", type=int, help="Haystacks per length (5)."),
        click.option("--arithmetic", type=int, help="Generated arithmetic items (30)."),
        click.option(
            "--tasks",
            "task_sets",
            multiple=True,
            help="NAME=PATH[:exact|number|choice], a JSONL task set (repeatable).",
        ),
        click.option("--max-tokens", "q_max_tokens", type=int, help="Greedy tokens per answer."),
        click.option("--no-floor", is_flag=True, help="Skip the A' pass (floor taken as 0)."),
        click.option("--concurrency", type=int, help="Requests in flight per arm (4)."),
        click.option("--quality-seed", type=int, help="Seed of the generated items."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _quality_spec(opts: Mapping[str, Any], base: Any = None) -> Any:
    """A QualitySpec from the workload's (if any) updated by the flags given.

    Raises:
        InputError: a flag value the spec refuses (names the field, the rule, the value).
    """
    from pydantic import ValidationError

    from tierctl.errors import InputError

    try:
        return _quality_spec_of(opts, base)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(
            f"bad quality option {where}: {err['msg']}",
            value=err.get("input"),
            fix="see tierctl bench quality --help",
        ) from None


def _quality_spec_of(opts: Mapping[str, Any], base: Any) -> Any:
    from tierctl.bench.quality.spec import PasskeySpec, QualitySpec, TaskSetSpec, TeacherForcedSpec
    from tierctl.errors import InputError

    spec = base or QualitySpec()
    tf = spec.teacher_forced.model_copy(
        update={
            k: v
            for k, v in (
                ("count", opts.get("texts")),
                ("tokens", opts.get("text_tokens")),
                ("path", opts.get("texts_file")),
            )
            if v is not None
        }
    )
    update: dict[str, Any] = {"teacher_forced": TeacherForcedSpec(**tf.model_dump())}
    if opts.get("passkey_lengths"):
        try:
            lengths = tuple(int(x) for x in str(opts["passkey_lengths"]).split(",") if x.strip())
        except ValueError:
            raise InputError(
                f"bad --passkey {opts['passkey_lengths']!r}",
                rule="comma-separated context lengths in tokens",
                fix="e.g. --passkey 512,4096",
            ) from None
        update["passkey"] = PasskeySpec(
            lengths=lengths, per_length=opts.get("passkey_per_length") or spec.passkey.per_length
        )
    tasks = list(spec.tasks)
    for text in opts.get("task_sets") or ():
        name, sep, rest = text.partition("=")
        path, _, scoring = (
            rest.rpartition(":")
            if rest.endswith((":exact", ":number", ":choice"))
            else (rest, "", "exact")
        )
        if not sep or not name or not path:
            raise InputError(
                f"bad --tasks {text!r}",
                rule="NAME=PATH[:exact|number|choice]",
                fix="e.g. --tasks gsm8k=data/gsm8k-100.jsonl:number",
            )
        tasks.append(TaskSetSpec(name=name, path=path, scoring=scoring))
    update["tasks"] = tuple(tasks)
    for key, field in (
        ("arithmetic", "arithmetic"),
        ("q_max_tokens", "max_tokens"),
        ("concurrency", "concurrency"),
        ("quality_seed", "seed"),
    ):
        if opts.get(key) is not None:
            update[field] = opts[key]
    if opts.get("no_floor"):
        update["floor"] = False
    if opts.get("engine") and opts["engine"] != "auto":
        update["engine"] = opts["engine"]
    return QualitySpec(**{**spec.model_dump(), **update})


def _health_targets(a_url: str, b_url: str, opts: Mapping[str, Any]) -> list[Any]:
    from tierctl.bench.health import ArmTarget

    engine = opts.get("engine")
    out = []
    for arm, url in (("A", a_url), ("B", b_url)):
        low = arm.lower()
        log, pid = opts.get(f"{low}_log"), opts.get(f"{low}_pid_file")
        out.append(
            ArmTarget(
                arm,
                url,
                engine=None if engine in (None, "auto") else engine,
                log_path=Path(log) if log else None,
                container=opts.get(f"{low}_container"),
                pid_file=Path(pid) if pid else None,
            )
        )
    return out


def _print_health(console: Console, report: Any) -> None:
    for line in report.lines():
        bad = line.startswith("arm ") and "0 restarts, 0 OOMs, 0 fatal" not in line
        text = escape(line)
        console.print(f"[bold red]{text}[/bold red]" if bad else text)


@click.group()
def bench() -> None:
    """Load-test endpoints: workloads, liveness probes under load, paired A/B."""


@bench.command("run")
@click.option("--url", required=True, help="Base URL of the OpenAI-compatible server.")
@_workload_options
def run(url: str, **opts: Any) -> ExitCode:
    """Run a workload against one endpoint, with the probe lane beside it."""
    from tierctl.bench import eventloop
    from tierctl.bench.clientcheck import verdict_line
    from tierctl.bench.execute import bench_run
    from tierctl.bench.report import no_ttft_line, probe_line, run_table
    from tierctl.progress import BenchBars

    workload = _workload(opts)
    out = Path(opts["out_dir"]) if opts["out_dir"] else None
    with BenchBars() as bars, _client_priority(opts, _console()):
        outcome = eventloop.run(
            bench_run(
                url,
                workload,
                tokenizer=opts["tokenizer"],
                out_dir=out,
                plots=not opts["no_plots"],
                progress=bars,
            )
        )
    console = _console()
    rec = outcome.record
    console.print(run_table(rec))
    console.print(escape(probe_line(rec, workload.probe.unhealthy_after)))
    if rec.interrupted:
        console.print(
            f"[bold red]INTERRUPTED[/bold red] after {rec.duration_s:.1f} s: sent {rec.sent} of "
            f"{rec.planned} planned; these results are partial"
        )
    console.print(
        f"sent {rec.sent} = completed {rec.count('completed')} + failed "
        f"{rec.count('failed')} + timed out {rec.count('timed_out')}"
    )
    missing = no_ttft_line(rec.requests)
    for w in [*rec.warnings, *([missing] if missing else [])]:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    line = verdict_line(rec.client)
    console.print(f"[bold red]{line}[/bold red]" if rec.client_bound else line)
    note = eventloop.fallback_note()
    if note is not None:
        console.print(note)
    for f in outcome.files:
        console.print(f"wrote {escape(str(f))}")
    if rec.interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.OK


@dataclass(frozen=True)
class AbArgs(OptionArgs):
    """Every option of ``tierctl bench ab``: one field per click option, named as its
    parameter (the workload's fields are ``bench.flags.WorkloadFlags``'s too)."""

    # the arms and their order
    a_url: str
    b_url: str
    order: str
    repetitions: int
    flush_cache: bool
    shared_prompts: bool
    with_quality: bool
    a_name: str | None
    b_name: str | None
    # the workload (_workload_options)
    workload_path: str | None
    burst: str | None
    output_tokens: int
    hammer_rate: float | None
    hammer_constant: bool
    hammer_concurrency: int | None
    hammer_count: int
    hammer_duration: float | None
    hammer_tokens: str
    trace_path: str | None
    trace_format: str
    time_scale: float
    api: str | None
    model: str | None
    seed: int | None
    timeout_s: float | None
    max_duration_s: float | None
    probe: str | None
    no_probe: bool
    tokenizer: str | None
    out_dir: str | None
    no_plots: bool
    realtime: bool
    # the quality lane (_quality_options)
    texts: int | None
    text_tokens: int | None
    texts_file: str | None
    passkey_lengths: str | None
    passkey_per_length: int | None
    arithmetic: int | None
    task_sets: tuple[str, ...]
    q_max_tokens: int | None
    no_floor: bool
    concurrency: int | None
    quality_seed: int | None
    # the arms' health (_health_options)
    a_log: str | None
    a_container: str | None
    a_pid_file: str | None
    b_log: str | None
    b_container: str | None
    b_pid_file: str | None
    engine: str
    health_interval_s: float
    fail_on_unhealthy: bool


@bench.command("ab")
@click.option("--a", "a_url", required=True, help="Base URL of arm A (control).")
@click.option("--b", "b_url", required=True, help="Base URL of arm B (candidate).")
@click.option("--order", default="ABBA", show_default=True, help="Arm order per repetition.")
@click.option(
    "--repeat",
    "repetitions",
    type=int,
    default=1,
    show_default=True,
    help="Repetitions of the order.",
)
@click.option(
    "--flush-cache",
    is_flag=True,
    help="Flush each arm's prefix cache before every block, at its engine's endpoint "
    "(SGLang /flush_cache, vLLM /reset_prefix_cache with VLLM_SERVER_DEV_MODE=1).",
)
@click.option(
    "--shared-prompts",
    is_flag=True,
    help="Send the same prompts in every block (default: each block's lead with its own "
    "tokens, so none is served from another's prefix cache).",
)
@click.option(
    "--quality",
    "with_quality",
    is_flag=True,
    help="Run the quality lane after the latency blocks (defaults, or the workload's quality:).",
)
@click.option("--a-name", help="Name of arm A in plots and reports (e.g. the replica r1).")
@click.option("--b-name", help="Name of arm B in plots and reports (e.g. the replica r2).")
@_workload_options
@_quality_options
@_health_options
@into(AbArgs)
def ab(args: AbArgs) -> ExitCode:
    """Paired A/B: the same requests against A and B in counterbalanced blocks; B/A ratios."""
    from tierctl.bench import eventloop
    from tierctl.bench.execute import bench_ab
    from tierctl.bench.report import ab_client_bound, ab_client_line, ab_table, no_ttft_line
    from tierctl.progress import BenchBars

    opts = args.params()  # the option groups' helpers, shared with bench run and quality
    workload = _workload(opts)
    named = args.a_name or args.b_name
    with BenchBars() as bars, _client_priority(opts, _console()):
        outcome = eventloop.run(
            bench_ab(
                args.a_url,
                args.b_url,
                workload,
                order=args.order,
                repetitions=args.repetitions,
                flush=args.flush_cache,
                shared_prompts=args.shared_prompts,
                tokenizer=args.tokenizer,
                out_dir=Path(args.out_dir) if args.out_dir else None,
                plots=not args.no_plots,
                progress=bars,
                names=(args.a_name or "A", args.b_name or "B") if named else None,
                quality=(
                    _quality_spec(opts, workload.quality)
                    if args.with_quality or workload.quality
                    else None
                ),
                health=_health_targets(args.a_url, args.b_url, opts),
                health_interval_s=args.health_interval_s,
            )
        )
        bars.blocks_done(len(outcome.result.blocks))
    console = _console()
    console.print(ab_table(outcome.result, outcome.ratios))
    if outcome.health is not None:
        _print_health(console, outcome.health)
    if outcome.quality is not None:
        from tierctl.bench.quality.report import quality_table

        console.print(quality_table(outcome.quality))
    if outcome.result.interrupted:
        done = len(outcome.result.blocks)
        console.print(
            f"[bold red]INTERRUPTED[/bold red] in block {done} of "
            f"{outcome.result.repetitions * len(outcome.result.order)}: ratios are over the "
            f"{len(outcome.result.pairs())} complete pair(s) only"
        )
    for k, b in enumerate(outcome.result.blocks):
        for w in b.record.warnings:
            console.print(f"[yellow]warning:[/yellow] block {k} ({b.arm}): {escape(w)}")
    for arm in ("A", "B"):
        reqs = [r for b in outcome.result.blocks if b.arm == arm for r in b.record.requests]
        missing = no_ttft_line(reqs)
        if missing:
            console.print(f"[yellow]warning:[/yellow] arm {arm}: {escape(missing)}")
    ab_labels = {"flush": "--flush-cache", "shared_prompts": "--shared-prompts"}
    for w in outcome.result.warnings:
        w = label_params(w, tuple(ab_labels), ab_labels)
        console.print(f"[bold yellow]warning:[/bold yellow] {escape(w)}")
    line = ab_client_line(outcome.result)
    console.print(f"[bold red]{line}[/bold red]" if ab_client_bound(outcome.result) else line)
    note = eventloop.fallback_note()
    if note is not None:
        console.print(note)
    for f in outcome.files:
        console.print(f"wrote {escape(str(f))}")
    if outcome.result.interrupted:
        return ExitCode.INTERRUPTED
    if args.fail_on_unhealthy and outcome.health is not None and not outcome.health.healthy:
        console.print("[bold red]unhealthy arm: failing (--fail-on-unhealthy)[/bold red]")
        return ExitCode.FAILURE
    return ExitCode.OK


@bench.command("quality")
@click.argument("a_url")
@click.argument("b_url")
@_quality_options
@_health_options
@click.option("--model", help="Model name (default: first of /v1/models).")
@click.option("--timeout", "timeout_s", type=float, help="Per-request timeout, s (300).")
@click.option("--alpha", type=float, help="Level of the floor and McNemar tests (0.05).")
@output_option(
    "out_dir",
    folder=True,
    path_type=str,
    help="Write quality.json, quality.md and quality_agreement.png here.",
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG.")
@click.option("--fail-above-floor", is_flag=True, help="Exit 1 when B is above the noise floor.")
def quality(a_url: str, b_url: str, **opts: Any) -> ExitCode:
    """Does B change what the model says? Teacher-forced agreement, passkey and task sets, A vs B
    against the A vs A' noise floor, with both arms' health watched."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tierctl.bench.execute import check_reachable, check_url
    from tierctl.bench.quality.check import check_quality
    from tierctl.bench.quality.lane import build_items
    from tierctl.bench.quality.report import quality_table, write_quality

    a_url, b_url = check_url(a_url, "A_URL"), check_url(b_url, "B_URL")
    spec = _quality_spec(opts)
    extra = {k: opts[k] for k in ("timeout_s", "alpha") if opts.get(k) is not None}
    if extra:
        spec = spec.model_copy(
            update={"timeout_s" if k == "timeout_s" else k: v for k, v in extra.items()}
        )
    texts, tasks = build_items(spec)  # a bad task file is reported before an unreachable arm
    check_reachable(a_url, "A_URL")
    check_reachable(b_url, "B_URL")
    total = (len(texts) + len(tasks)) * (3 if spec.floor else 2)
    console = _console()
    with Progress(
        TextColumn("quality {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
    ) as bars:
        task = bars.add_task("A", total=total)

        def on_item(arm: str, _item: str) -> None:
            bars.update(task, advance=1, description=arm)

        result, health = asyncio.run(
            check_quality(
                a_url,
                b_url,
                spec,
                targets=_health_targets(a_url, b_url, opts),
                model=opts.get("model"),
                on_item=on_item,
                health_interval_s=opts["health_interval_s"],
            )
        )
    console.print(quality_table(result))
    _print_health(console, health)
    for e in result.errors[:10]:
        console.print(f"[yellow]error:[/yellow] {escape(str(e))}")
    if opts.get("out_dir"):
        for f in write_quality(result, Path(opts["out_dir"]), plots=not opts["no_plots"]):
            console.print(f"wrote {escape(str(f))}")
    if opts["fail_on_unhealthy"] and not health.healthy:
        return ExitCode.FAILURE
    if opts["fail_above_floor"] and result.above:
        return ExitCode.FAILURE
    return ExitCode.OK
