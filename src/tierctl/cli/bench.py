"""``tierctl bench``: load-test one endpoint (``run``) or two in a paired A/B (``ab``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from tierctl.errors import ExitCode
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
        click.option(
            "--out",
            "out_dir",
            type=click.Path(file_okay=False),
            help="Write results.json, report.md and PNG plots here.",
        ),
        click.option("--no-plots", is_flag=True, help="Skip the PNG plots."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _workload(opts: dict[str, Any]) -> Any:
    from tierctl.bench.flags import WorkloadFlags, workload_from_flags

    names = WorkloadFlags.__dataclass_fields__
    return workload_from_flags(WorkloadFlags(**{k: v for k, v in opts.items() if k in names}))


def _console() -> Console:
    probe = Console()
    # Tables are wide; when piped, do not squeeze them into rich's 80-column default.
    return probe if probe.is_terminal else Console(width=200)


@click.group()
def bench() -> None:
    """Load-test endpoints: workloads, liveness probes under load, paired A/B."""


@bench.command("run")
@click.option("--url", required=True, help="Base URL of the OpenAI-compatible server.")
@_workload_options
def run(url: str, **opts: Any) -> ExitCode:
    """Run a workload against one endpoint, with the probe lane beside it."""
    from tierctl.bench.clientcheck import verdict_line
    from tierctl.bench.execute import bench_run
    from tierctl.bench.report import probe_line, run_table

    workload = _workload(opts)
    out = Path(opts["out_dir"]) if opts["out_dir"] else None
    outcome = bench_run(
        url, workload, tokenizer=opts["tokenizer"], out_dir=out, plots=not opts["no_plots"]
    )
    console = _console()
    rec = outcome.record
    console.print(run_table(rec))
    console.print(probe_line(rec, workload.probe.unhealthy_after))
    if rec.interrupted:
        console.print(
            f"[bold red]INTERRUPTED[/bold red] after {rec.duration_s:.1f} s: sent {rec.sent} of "
            f"{rec.planned} planned; these results are partial"
        )
    console.print(
        f"sent {rec.sent} = completed {rec.count('completed')} + failed "
        f"{rec.count('failed')} + timed out {rec.count('timed_out')}"
    )
    for w in rec.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    line = verdict_line(rec.client)
    console.print(f"[bold red]{line}[/bold red]" if rec.client_bound else line)
    for f in outcome.files:
        console.print(f"wrote {f}")
    if rec.interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.OK


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
@click.option("--flush-cache", is_flag=True, help="POST /flush_cache before every block.")
@click.option("--a-name", help="Name of arm A in plots and reports (e.g. the replica r1).")
@click.option("--b-name", help="Name of arm B in plots and reports (e.g. the replica r2).")
@_workload_options
def ab(
    a_url: str,
    b_url: str,
    order: str,
    repetitions: int,
    flush_cache: bool,
    a_name: str | None,
    b_name: str | None,
    **opts: Any,
) -> ExitCode:
    """Paired A/B: the same requests against A and B in counterbalanced blocks; B/A ratios."""
    from tierctl.bench.execute import bench_ab
    from tierctl.bench.report import ab_client_bound, ab_client_line, ab_table

    workload = _workload(opts)
    out = Path(opts["out_dir"]) if opts["out_dir"] else None
    outcome = bench_ab(
        a_url,
        b_url,
        workload,
        order=order,
        repetitions=repetitions,
        flush=flush_cache,
        tokenizer=opts["tokenizer"],
        out_dir=out,
        plots=not opts["no_plots"],
        names=(a_name or "A", b_name or "B") if a_name or b_name else None,
    )
    console = _console()
    console.print(ab_table(outcome.result, outcome.ratios))
    if outcome.result.interrupted:
        done = len(outcome.result.blocks)
        console.print(
            f"[bold red]INTERRUPTED[/bold red] in block {done} of "
            f"{outcome.result.repetitions * len(outcome.result.order)}: ratios are over the "
            f"{len(outcome.result.pairs())} complete pair(s) only"
        )
    for k, b in enumerate(outcome.result.blocks):
        for w in b.record.warnings:
            console.print(f"[yellow]warning:[/yellow] block {k} ({b.arm}): {w}")
    line = ab_client_line(outcome.result)
    console.print(f"[bold red]{line}[/bold red]" if ab_client_bound(outcome.result) else line)
    for f in outcome.files:
        console.print(f"wrote {f}")
    return ExitCode.INTERRUPTED if outcome.result.interrupted else ExitCode.OK
