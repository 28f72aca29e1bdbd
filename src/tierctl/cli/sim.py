"""``tierctl sim``: run, compare, fit and serve the scheduler model."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from tierctl.cli.options import format_option, output_option
from tierctl.sim.cost import DEFAULT_PRESET, PRESETS
from tierctl.sim.result import SimResult, SimSummary
from tierctl.sim.surface import ENGINES
from tierctl.sim.workload import GENERATORS
from tierctl.traces import TRACE_FORMATS

if TYPE_CHECKING:
    from tierctl.sim.config import EngineConfig

_PRESET_OPT = click.option(
    "--preset",
    type=click.Choice(sorted(PRESETS)),
    default=DEFAULT_PRESET,
    show_default=True,
    help="Step cost model (a bundled one).",
)
_COST_MODEL_OPT = click.option(
    "--cost-model",
    "cost_model",
    type=click.Path(dir_okay=False),
    help="Step cost model file (written by `tierctl sim fit --output`); replaces --preset.",
)
_ENGINE_OPT = click.option(
    "--engine",
    type=click.Choice(ENGINES),
    help="Engine whose scheduler to model for a bare argv (default: from the launcher, "
    "else sglang; --spec gives its own).",
)


_VERSION_OPT = click.option(
    "--engine-version",
    "engine_version",
    help="The engine release a bare argv is pinned to: its flag catalog and its scheduler "
    "rules apply (default: the release the simulator imitates; --spec pins its own).",
)


def _ENGINE(f: Any) -> Any:
    return _ENGINE_OPT(_VERSION_OPT(f))


def _PRESET(f: Any) -> Any:
    return _PRESET_OPT(_COST_MODEL_OPT(f))


def _cost(kw: dict[str, Any]) -> Any:
    """The cost model named by --preset, or read from --cost-model."""
    from tierctl.sim.costfile import resolve_cost

    return resolve_cost(kw.pop("preset"), kw.pop("cost_model"))


def _cost_source(kw: dict[str, Any]) -> str:
    """Where the cost model comes from (read before :func:`_cost` takes the options): chosen,
    or the default preset, whose coefficients are one GPU's whatever the engine modelled."""
    path, name = kw.get("cost_model"), kw.get("preset")
    if path is not None:
        return f"from --cost-model {path}"
    if name == DEFAULT_PRESET:
        return (
            "the default preset; its coefficients are that GPU's, whatever this engine runs "
            "on: pass --preset, or --cost-model with a model `tierctl sim fit` measured"
        )
    return "--preset"


def cost_line(name: str, source: str) -> str:
    """Which cost model the figures come from."""
    return f"cost model: {name} ({source})"


def not_completed_lines(
    arms: dict[str, Any], counts: dict[str, tuple[dict[str, int], int]] | None = None
) -> list[str]:
    """Per arm, how many requests did not complete and why (one line for both arms when
    they agree): what a completion below 1 is made of. ``counts`` (reasons, requests) per
    arm stands for results that kept no requests (a streamed trace)."""
    from tierctl.sim.result import not_completed

    if counts is not None:
        counted = {arm: c[0] for arm, c in counts.items()}
        totals = {arm: c[1] for arm, c in counts.items()}
    else:
        counted = {arm: not_completed(result.requests) for arm, result in arms.items()}
        totals = {arm: len(result.requests) for arm, result in arms.items()}
    names = list(arms)
    if len(names) > 1 and all(counted[n] == counted[names[0]] for n in names):
        names = [names[0]]
        label = {names[0]: "both arms" if len(arms) > 1 else names[0]}
    else:
        label = {n: n for n in names}
    lines = []
    for arm in names:
        reasons = counted[arm]
        if not reasons:
            continue
        missing = sum(reasons.values())
        why = "; ".join(f"{n} {reason}" for reason, n in reasons.items())
        lines.append(f"{label[arm]}: {missing} of {totals[arm]} requests did not complete: {why}")
    return lines


def _warn_not_modelled(flags: tuple[str, ...]) -> None:
    for name in flags:
        click.echo(
            f"warning: --{name} differs between the arms but is not modelled by the "
            "simulator; the figures cannot show its effect",
            err=True,
        )


def _warn_block_size(arms: tuple[Any, ...], cost: Any) -> None:
    """Warn, once per note, for an arm whose KV pool is sized in blocks of an unknown size
    (``--num-gpu-blocks-override`` with neither ``--block-size`` nor a device)."""
    from tierctl.sim.disagg_config import DisaggTier
    from tierctl.sim.vllm_policy import block_size_note

    seen: set[str] = set()
    for arm in arms:
        configs = (*arm.prefill, *arm.decode) if isinstance(arm, DisaggTier) else (arm,)
        for config in configs:
            note = block_size_note(config, cost)
            if note is not None and note not in seen:
                seen.add(note)
                click.echo(f"warning: {note}", err=True)


def _warn_step_cost(flags: tuple[str, ...]) -> None:
    for name in flags:
        click.echo(
            f"warning: --{name} differs between the arms and changes the engine's step cost, "
            "which the cost model holds fixed (fitted at one setting): the ratios leave its "
            "effect out; measure it (`tierctl bench ab`) or fit a cost model at each setting",
            err=True,
        )


def _transfer_options(f: Any) -> Any:
    """The hand-off of a disaggregated arm (prefill and decode replicas)."""
    opts = [
        click.option("--transfer-slots", type=click.IntRange(1, 4096),
                     help="Disaggregated arms: KV transfers one prefill replica sends at once "
                     "(default: the engine's, from its profile: SGLang's 4 transfer queues)."),
        click.option("--kv-transfer-gb-per-s", "kv_transfer_gb_per_s",
                     type=click.FloatRange(min=0.0, min_open=True, max=3600.0),
                     help="Disaggregated arms: the KV link's bandwidth, GB/s (default: the "
                     "cost model's stated one)."),
    ]  # fmt: skip
    for opt in reversed(opts):
        f = opt(f)
    return f


def _transfer(kw: dict[str, Any]) -> Any:
    from tierctl.sim.disagg_config import TransferSettings

    return TransferSettings(kw.pop("transfer_slots"), kw.pop("kv_transfer_gb_per_s"))


def _workload_options(f: Any) -> Any:
    opts = [
        click.option("--workload", "kind", type=click.Choice(GENERATORS), default="field",
                     show_default=True, help="Built-in workload (ignored with --trace)."),
        click.option("--trace", type=click.Path(dir_okay=False), help="Trace file to replay."),
        click.option("--trace-format", type=click.Choice(TRACE_FORMATS), default="jsonl",
                     show_default=True),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--count", type=int, default=8, show_default=True, help="Burst size."),
        click.option("--input-tokens", type=int, default=720_000, show_default=True,
                     help="Burst prompt tokens."),
        click.option("--output-tokens", type=int, default=256, show_default=True,
                     help="Burst output tokens."),
        click.option("--rate", "rate_per_s", type=float, default=2.0, show_default=True,
                     help="Hammer requests per second."),
        click.option("--duration-s", type=float, default=600.0, show_default=True,
                     help="Hammer duration."),
        click.option("--hours", type=float, default=24.0, show_default=True,
                     help="Length of the 'day' trace."),
    ]  # fmt: skip
    for opt in reversed(opts):
        f = opt(f)
    return f


def _workload(kw: dict[str, Any]) -> Any:
    from tierctl.sim.sources import WorkloadSource

    keys = {f.name for f in dataclasses.fields(WorkloadSource)}
    _refuse_ignored_workload_options(kw)
    return WorkloadSource(**{k: kw.pop(k) for k in list(kw) if k in keys})


#: The size options of the built-in workloads, by parameter name.
_SIZE_OPTIONS = {
    "count": "--count",
    "input_tokens": "--input-tokens",
    "output_tokens": "--output-tokens",
    "rate_per_s": "--rate",
    "duration_s": "--duration-s",
    "hours": "--hours",
}


def _given(name: str) -> bool:
    """Whether the option of parameter ``name`` was given on the command line."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


def _refuse_ignored_workload_options(kw: dict[str, Any]) -> None:
    """Refuse a size option the chosen workload does not read (``--count 4`` with the default
    ``field`` workload was dropped silently), naming the workloads that do read it."""
    from tierctl.sim.workload import GENERATOR_PARAMS

    kind = kw.get("kind", "field")
    if kw.get("trace") is not None:
        used: frozenset[str] = frozenset()
        what = "--trace (a trace carries its own sizes)"
    else:
        used = GENERATOR_PARAMS.get(kind, frozenset())
        what = f"--workload {kind}" + (" (the default)" if not _given("kind") else "")
    for name, flag in _SIZE_OPTIONS.items():
        if name in used or not _given(name):
            continue
        readers = [k for k, ps in GENERATOR_PARAMS.items() if name in ps]
        raise click.UsageError(
            f"{flag} is not read by {what}: it would be ignored; give "
            + " or ".join(f"--workload {k}" for k in readers)
            + f" with {flag}, or leave {flag} out"
        )


@click.group()
def sim() -> None:
    """Simulate the engine scheduler, offline or as an OpenAI-compatible server."""


@contextlib.contextmanager
def _sim_bar() -> Iterator[Callable[[float, float], None]]:
    """A progress bar over simulated time, on stderr, drawn only on a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} of {task.total:,.0f} simulated s"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    task = bar.add_task("sim", total=1.0)

    def tick(now_s: float, end_s: float) -> None:
        bar.update(task, total=max(end_s, 1.0), completed=min(now_s, max(end_s, 1.0)))

    with bar:
        yield tick


@sim.command(context_settings={"ignore_unknown_options": True})
@click.option("--spec", type=click.Path(dir_okay=False), help="Tier spec to take the argv from.")
@click.option(
    "--replica",
    help="Replica of --spec to simulate; several, comma-separated (p1,d1), for a "
    "disaggregated arm: a prefill and a decode pool.",
)
@click.option(
    "--pool-argv",
    "pool_argv",
    multiple=True,
    help="Another replica of a disaggregated arm, beside the argv after `--` (one string; "
    "repeat for each; prefix prefill:/decode: where its flags leave the side open).",
)
@_ENGINE
@_PRESET
@_workload_options
@_transfer_options
@format_option(help="text, or json: the full result.")
@click.option("--per-request", is_flag=True, help="Also print one line per request.")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def run(
    spec: str | None,
    replica: str | None,
    pool_argv: tuple[str, ...],
    engine: str | None,
    engine_version: str | None,
    fmt: str,
    per_request: bool,
    argv: tuple[str, ...],
    **kw: Any,
) -> None:
    """Simulate one replica: `tierctl sim run [--spec S --replica R] [-- ENGINE ARGV...]`."""
    import shlex

    from tierctl.sim.sources import EngineSource, run_sim, run_trace_streamed

    if spec is not None and replica is None:
        raise click.UsageError("--spec needs --replica")
    source = _cost_source(kw)
    cost = _cost(kw)
    more = tuple(tuple(shlex.split(a)) for a in pool_argv)
    engine_source = EngineSource(
        argv, spec, replica, engine, engine_version, more=more, transfer=_transfer(kw)
    )
    workload = _workload(kw)
    counts = None
    _warn_block_size((engine_source.arm(),), cost)
    with _sim_bar() as tick:
        # Only the summary is printed: a trace is simulated streamed, in bounded memory.
        streamed = None if (fmt == "json") or per_request else run_trace_streamed(
            engine_source, workload, cost, progress=tick
        )  # fmt: skip
        if streamed is not None:
            result, reasons, _exact = streamed
            counts = {"run": (reasons, result.summary.requests)}
        else:
            result = run_sim(engine_source, workload, cost, progress=tick)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=1))
        return
    click.echo(_render_run(result, per_request))
    for line in handoff_lines("", result):
        click.echo(line)
    if result.stopped:
        click.echo(result.stopped)
    for line in not_completed_lines({"run": result}, counts):
        click.echo(line)
    click.echo(cost_line(result.preset, source))


@sim.command()
@click.option("--control", "control_argv", multiple=True,
              help="Control engine argv (one string; repeat for each replica of a "
              "disaggregated arm).")  # fmt: skip
@click.option("--candidate", "candidate_argv", multiple=True,
              help="Candidate engine argv (repeat as --control).")  # fmt: skip
@click.option("--spec", type=click.Path(dir_okay=False), help="Tier spec for both replicas.")
@click.option("--control-replica",
              help="Control replica of --spec (several, comma-separated: a prefill and a "
              "decode pool).")  # fmt: skip
@click.option("--candidate-replica", help="Candidate replica(s) of --spec.")
@click.option("--focus", help="Only requests whose id starts with this (e.g. 'dec', 'burst').")
@_ENGINE
@_PRESET
@_workload_options
@_transfer_options
@click.option(
    "--draws",
    type=click.IntRange(1, 500),
    default=20,
    show_default=True,
    help="Simulated A/B and A/A pairs behind each interval (a model with jitter or bootstrap "
    "refits; a deterministic one needs one).",
)
@click.option(
    "--aa-floor",
    "aa_floor_text",
    default="0",
    show_default=True,
    help="A measured A/A floor (0.2: ratios within [0.83, 1.2] are noise), e.g. from your own "
    "`tierctl bench ab` of identical arms, for every figure or per figure ('TTFT p50=0.25,"
    "TPOT p50=0.1'); widens the simulated floor, and the interval by what it exceeds it.",
)
@format_option()
def compare(
    control_argv: tuple[str, ...],
    candidate_argv: tuple[str, ...],
    spec: str | None,
    control_replica: str | None,
    candidate_replica: str | None,
    focus: str | None,
    engine: str | None,
    engine_version: str | None,
    draws: int,
    aa_floor_text: str,
    fmt: str,
    **kw: Any,
) -> None:
    """Run two argv sets on the identical workload; print candidate/control ratios, each with
    its interval and verdict against the A/A floor."""

    from tierctl.sim.costfile import resolve_fit
    from tierctl.sim.sources import what_if_sims

    a, b = _arms(
        control_argv, candidate_argv, spec, control_replica, candidate_replica, engine,
        engine_version, _transfer(kw),
    )  # fmt: skip
    aa_floor = _aa_floor(aa_floor_text)
    source = _cost_source(kw)
    cost, fit_unc = resolve_fit(kw.pop("preset"), kw.pop("cost_model"))
    wi = what_if_sims(
        a, b, _workload(kw), cost, fit_unc, focus=focus, draws=draws, aa_floor=aa_floor
    )
    cmp = wi.comparison
    _warn_block_size((a.arm(), b.arm()), cost)
    _judged_from(cmp, defaulted=kw.get("trace") is None and not _given("kind"))
    _warn_not_modelled(cmp.not_modelled)
    _warn_step_cost(cmp.step_cost)
    if fmt == "json":
        click.echo(json.dumps(_compare_doc(wi, focus, source), indent=1))
        return
    click.echo(_render_compare(wi, focus, source))


#: The widest A/A floor ``--aa-floor`` takes: identical arms 101x apart (a measured floor of
#: 33.5, a starved client's TTFT, is kept; anything past this is a broken A/A run).
AA_FLOOR_MAX = 100.0


def _judged_from(cmp: Any, defaulted: bool) -> None:
    """Say how many requests each arm's figures come from when some were refused as too long
    for the arm (the context or the KV pool); refuse when the workload was not chosen: the
    default is the bundled long-context example, which on a user's own tier left 3 of 11
    requests to judge from."""
    from tierctl.errors import InputError

    for arm, res in (("control", cmp.control), ("candidate", cmp.candidate)):
        refused = [r for r in res.requests if r.status == "rejected"]
        if not refused:
            continue
        total = len(res.requests)
        why = refused[0].reason
        if defaulted:
            raise InputError(
                f"the default workload (the bundled long-context example) does not fit the "
                f"{arm}: {len(refused)} of its {total} requests are refused ({why}), so the "
                f"figures would be judged from {total - len(refused)}",
                rule="sim compare judges both arms on a workload they can serve",
                value=f"--workload field (default), {len(refused)} of {total} refused",
                fix="choose the workload: --workload burst --count N --input-tokens T "
                "--output-tokens O, --workload hammer --rate R, or --trace FILE",
                params=("workload",),
            )
        click.echo(
            f"warning: the {arm}'s figures are judged from {total - len(refused)} of {total} "
            f"requests: {len(refused)} refused ({why})",
            err=True,
        )


def _aa_floor(text: str) -> float | dict[str, float]:
    """``--aa-floor``: one number, or ``METRIC=NUMBER`` pairs separated by commas."""
    from tierctl.sim.result import COMPARE_METRICS

    def number(raw: str, what: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= AA_FLOOR_MAX:
            raise click.BadParameter(
                f"{what} {raw!r} is not a number in 0..{AA_FLOOR_MAX:g} (0.2: ratios within "
                f"[0.83, 1.2] are noise; {AA_FLOOR_MAX:g}: within [1/{AA_FLOOR_MAX + 1:g}, "
                f"{AA_FLOOR_MAX + 1:g}], past which an A/A run of identical arms is broken, "
                "not noisy)",
                param_hint="--aa-floor",
            )
        if value > 1.0:
            click.echo(
                f"warning: {what} {value:g} says identical arms differ by up to "
                f"{value + 1:.3g}x: only a ratio beyond that can be called an effect; a floor "
                "this wide usually means a starved client or a stalled host in the A/A run "
                "(check it with `tierctl bench ab --realtime`)",
                err=True,
            )
        return value

    if "=" not in text:
        return number(text.strip(), "the floor")
    labels = {label for label, _ in COMPARE_METRICS}
    out: dict[str, float] = {}
    for part in text.split(","):
        label, _, raw = part.partition("=")
        label = label.strip()
        if label not in labels:
            raise click.BadParameter(
                f"{label!r} is no figure of the table; use one of: " + ", ".join(sorted(labels)),
                param_hint="--aa-floor",
            )
        out[label] = number(raw.strip(), f"the floor of {label}")
    return out


def _arms(
    control_argv: tuple[str, ...] | str,
    candidate_argv: tuple[str, ...] | str,
    spec: str | None,
    control_replica: str | None,
    candidate_replica: str | None,
    engine: str | None,
    engine_version: str | None,
    transfer: Any = None,
) -> tuple[Any, Any]:
    """The two arms of a comparison: argv strings (several for a disaggregated arm), or
    replicas of one spec."""
    import shlex

    from tierctl.sim.sources import EngineSource

    if spec is not None and not (control_replica and candidate_replica):
        raise click.UsageError("--spec needs --control-replica and --candidate-replica")

    def source(argvs: tuple[str, ...] | str, replica: str | None) -> EngineSource:
        given = (argvs,) if isinstance(argvs, str) else argvs
        split = [tuple(shlex.split(a)) for a in given] or [()]
        return EngineSource(
            split[0], spec, replica, engine, engine_version, more=tuple(split[1:]),
            transfer=transfer,
        )  # fmt: skip

    return source(control_argv, control_replica), source(candidate_argv, candidate_replica)


def _compare_doc(wi: Any, focus: str | None, source: str) -> dict[str, Any]:
    from tierctl.sim.result import not_completed

    cmp = wi.comparison
    return {
        "focus": focus,
        "table": [dataclasses.asdict(r) for r in wi.rows],
        "draws": wi.draws,
        "uncertainty": wi.uncertainty,
        "extrapolation": list(wi.extrapolation),
        "not_modelled": list(cmp.not_modelled),
        "step_cost_not_modelled": list(cmp.step_cost),
        "stopped": {"control": cmp.control.stopped, "candidate": cmp.candidate.stopped},
        "preemptions": {
            "control": cmp.control.summary.preemptions,
            "candidate": cmp.candidate.summary.preemptions,
        },
        "handoff": {"control": cmp.control.handoff, "candidate": cmp.candidate.handoff},
        "cost_model": {"name": cmp.control.preset, "source": source},
        "not_completed": {
            "control": not_completed(cmp.control.requests),
            "candidate": not_completed(cmp.candidate.requests),
        },
        "control": dataclasses.asdict(cmp.control.summary),
        "candidate": dataclasses.asdict(cmp.candidate.summary),
    }


def _render_compare(wi: Any, focus: str | None, source: str) -> str:
    cmp = wi.comparison
    lines = [f"workload {cmp.control.workload}" + (f", requests {focus}*" if focus else "")]
    lines.append(
        f"{'metric':<12}{'control':>10}{'candidate':>11}  {'ratio [90 %]':<21}{'A/A':>5}  verdict"
    )
    for r in wi.rows:
        ratio = _fmt(r.ratio, ".2f")
        if r.low is not None and r.high is not None and r.low != r.high:
            ratio += f" [{r.low:.2f}, {r.high:.2f}]"
        floor = f"±{r.floor:.0%}"
        lines.append(
            f"{r.metric:<12}{_fmt(r.control):>10}{_fmt(r.candidate):>11}  {ratio:<21}"
            f"{floor:>5}  {r.verdict}"
        )
    lines.append(wi.uncertainty)
    lines.append(
        "A/A: the floor (identical arms' ratio range); an interval that reaches inside "
        "1 ± floor is no measurable effect"
    )
    for line in wi.extrapolation:
        lines.append(f"extrapolates beyond the fit: {line}")
    if wi.extrapolation:
        lines.append(
            "  fit at a workload whose steps span both arms' (`tierctl sim fit-plan` designs one)"
        )
    if cmp.not_modelled:
        flags = ", ".join(f"--{n}" for n in cmp.not_modelled)
        lines.append(f"not modelled, and different between the arms: {flags}")
    if cmp.step_cost:
        flags = ", ".join(f"--{n}" for n in cmp.step_cost)
        lines.append(f"step cost held fixed (the ratios leave them out): {flags}")
    pre = (cmp.control.summary.preemptions, cmp.candidate.summary.preemptions)
    if any(pre):
        lines.append(
            f"preemptions under KV pressure (vLLM: recompute; SGLang: retract_decode): "
            f"control {pre[0]}, candidate {pre[1]}"
        )
    for arm, res in (("control", cmp.control), ("candidate", cmp.candidate)):
        if res.stopped:
            lines.append(f"{arm}: {res.stopped}")
    lines += not_completed_lines({"control": cmp.control, "candidate": cmp.candidate})
    lines += handoff_lines("control: ", cmp.control) + handoff_lines("candidate: ", cmp.candidate)
    lines.append(cost_line(cmp.control.preset, source))
    return "\n".join(lines)


def handoff_lines(label: str, result: SimResult) -> list[str]:
    """A disaggregated arm's pools and hand-off, in words (none for one replica)."""
    h = result.handoff
    if not h:
        return []
    link = h["kv_transfer"]
    if link["gb_per_s"]:
        cost = (
            f"{link['bytes_per_token']:,.0f} B of KV a token over {link['gb_per_s']:g} GB/s "
            f"+ {link['base_s'] * 1e3:g} ms (stated by the cost model)"
        )
    else:
        cost = "no link stated by the cost model: transfers take only their fixed latency"
    return [
        f"{label}disaggregated: {h['prefill_replicas']} prefill + {h['decode_replicas']} decode "
        f"replicas, {h['transfers']} KV transfers (at most {h['peak_concurrent_transfers']} at "
        f"once of {h['transfer_slots']} slots per prefill replica), transfer p50 "
        f"{_fmt(h['transfer_p50_s'])} s, hand-off wait p50 {_fmt(h['handoff_wait_p50_s'])} s "
        f"max {_fmt(h['handoff_wait_max_s'])} s",
        f"{label}KV transfer: {cost}",
    ]


@sim.command("fit-plan")
@click.option("--control", "control_argv", default="", help="Control engine argv (one string).")
@click.option("--candidate", "candidate_argv", default="", help="Candidate engine argv.")
@click.option("--spec", type=click.Path(dir_okay=False), help="Tier spec for both replicas.")
@click.option("--control-replica", help="Control replica of --spec.")
@click.option("--candidate-replica", help="Candidate replica of --spec.")
@_ENGINE
@_PRESET
@_workload_options
@output_option("out", path_type=str, file_only=True, help="Write the fit trace (JSONL) here.")
@click.option("--force", is_flag=True, help="Overwrite --output if it holds another file.")
def fit_plan_cmd(
    control_argv: str,
    candidate_argv: str,
    spec: str | None,
    control_replica: str | None,
    candidate_replica: str | None,
    engine: str | None,
    engine_version: str | None,
    out: str | None,
    force: bool,
    **kw: Any,
) -> None:
    """Design a fit run whose steps span what both arms of a what-if will produce."""

    from tierctl.sim.fit_plan import fit_plan
    from tierctl.sim.workload_traces import write_jsonl

    a, b = _arms(
        control_argv, candidate_argv, spec, control_replica, candidate_replica, engine,
        engine_version,
    )  # fmt: skip
    cost = _cost(kw)
    plan = fit_plan(a.config(), b.config(), _workload(kw).load(), cost)
    d = plan.domain
    click.echo(
        f"both arms produce: steps of up to {d.step_tokens:,} prompt tokens, chunks up to "
        f"{d.position:,} tokens deep, {d.batch:,} requests decoding together over "
        f"{d.context:,} context tokens"
    )
    click.echo("run the fit engine with: " + " ".join(plan.argv_flags))
    reqs = plan.workload.requests
    click.echo(
        f"fit trace: {len(reqs)} requests over {reqs[-1].arrival_s if reqs else 0:.0f} s "
        "(lone prompts of rising length, then decode batches of rising size)"
    )
    for k, (flags, trace) in enumerate(plan.more_runs):
        click.echo(
            f"and a second fit run with: {' '.join(flags)} ({len(trace.requests)} lone prompts "
            "of rising length): the first run's budget cannot cut a prompt that fits the "
            "context into the smaller budget's deep chunks"
        )
        if out is not None:
            extra = f"{out}.run{k + 2}.jsonl"
            write_jsonl(trace, extra, force=force)
            click.echo(f"wrote {extra}", err=True)
    if out is not None:
        write_jsonl(plan.workload, out, force=force)
        click.echo(
            f"wrote {out}: replay it with `tierctl bench run --trace {out}`, then fit with "
            "`tierctl sim fit`",
            err=True,
        )


@sim.command(context_settings={"ignore_unknown_options": True})
@click.argument("source", type=click.Path(dir_okay=False))
@click.option(
    "--from",
    "kind",
    type=click.Choice(["auto", "steps", "bench", "sglang-log", "vllm-log", "spec-metrics"]),
    default="auto",
    show_default=True,
    help="What SOURCE is: a step log (JSONL, one line per engine step), a `tierctl bench "
    "run/ab` results.json (request timings only), an SGLang scheduler log ('Decode batch' "
    "lines: decode coefficients only), a vLLM log with --enable-logging-iteration-details "
    "('Iteration(N): ...' lines) or an engine's /metrics (a dump, or its http:// URL: "
    "speculative decoding's acceptance only); auto tells them apart by content.",
)
@click.option(
    "--acceptance",
    "acceptance",
    help="Also fit speculative decoding's acceptance from the engine's counters: a /metrics "
    "dump or its http:// URL, taken after the measured run.",
)
@click.option(
    "--acceptance-baseline",
    "acceptance_baseline",
    help="The same engine's /metrics (dump or URL) before the run: its counters are "
    "subtracted (vLLM's are totals since start).",
)
@click.option(
    "--timings",
    type=click.Path(dir_okay=False, exists=True),
    help="With a vLLM iteration log: the same run's `tierctl bench` results.json, to fit the "
    "time between steps (scheduling, output handling) that the log does not cover.",
)
@click.option(
    "--spec-timings",
    "spec_timings",
    type=click.Path(dir_okay=False, exists=True),
    help="With an acceptance fit: `tierctl bench run` results.json of the speculative engine "
    "(the argv after --) on the fit trace, to fit the round's time beyond the forwards.",
)
@click.option(
    "--spec-reference",
    "spec_reference",
    type=click.Path(dir_okay=False, exists=True),
    help="With --spec-timings: results.json of the same trace on an engine without "
    "speculation (its argv: --spec-reference-argv); the ratio is fitted, not the host's bias.",
)
@click.option("--spec-reference-argv", "spec_reference_argv", help="The reference engine's argv.")
@click.option(
    "--allow-replay-mismatch",
    "allow_mismatch",
    is_flag=True,
    help="With a vLLM log and --timings: fit even when the log's replay against the timings "
    "mismatches more than 1 step in 20 (refused otherwise: those steps' decode contexts are "
    "unknown); the counts are warned and kept in the provenance.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cuda", "cpu", "unknown"]),
    default="auto",
    show_default=True,
    help="The device the measured engine ran on (the cost model's `device`: it gives the "
    "engine's defaults that depend on it, e.g. vLLM's KV block, 16 tokens on CUDA and 128 on "
    "CPU); auto: the engine log's start-up line, else unknown.",
)
@_ENGINE
@_PRESET
@output_option("out", path_type=str, file_only=True, help="Write the fitted cost model here.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@format_option()
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def fit(
    source: str,
    kind: str,
    acceptance: str | None,
    acceptance_baseline: str | None,
    timings: str | None,
    spec_timings: str | None,
    spec_reference: str | None,
    spec_reference_argv: str | None,
    allow_mismatch: bool,
    device: str,
    engine: str | None,
    engine_version: str | None,
    out: str | None,
    force: bool,
    fmt: str,
    argv: tuple[str, ...],
    **kw: Any,
) -> None:
    """Fit the step cost model to a step log or to measured request timings.

    `tierctl sim fit results.json --output m.json -- vllm serve M --max-num-batched-tokens 512`:
    the engine argv after `--` is the one the measured engine ran with. The base model
    (--preset or --cost-model) gives what the data cannot (memory sizes, defaults) and the
    starting point.
    """
    from pathlib import Path

    from tierctl.paths import check_output_path
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.costfile import write_cost_model
    from tierctl.sim.fitting import fit_source

    if out is not None:
        check_output_path(Path(out), "cost model")
    if out is not None and Path(out).exists() and not force:
        raise click.UsageError(f"{out} exists; pass --force to overwrite it")
    base = _cost(kw)
    config = EngineConfig.from_argv(list(argv), engine=engine, version=engine_version, strict=True)
    from tierctl.runtime.metrics_source import is_url
    from tierctl.sim.accept_fit import acceptance_from

    if is_url(source) and kind in ("auto", "spec-metrics"):
        model, entry = acceptance_from(source, base, config, baseline=acceptance_baseline)
        prov = {"fitted_on": [source], "method": "speculative decoding acceptance from the "
                "engine's live counters; the step coefficients kept from the base",
                "base": base.name, "engine": config.engine, "engine_argv": list(config.argv),
                "acceptance": entry}  # fmt: skip
    else:
        model, prov = fit_source(
            source, kind, base, config, timings=timings, allow_mismatch=allow_mismatch
        )
        for line in prov.get("warnings", ()):
            click.echo(f"warning: {line}", err=True)
    if acceptance is not None:
        model, prov["acceptance"] = acceptance_from(
            acceptance, model, config, baseline=acceptance_baseline
        )
    found, how = _fit_device(device, source, config.engine)
    model = dataclasses.replace(model, device=found)
    prov["device"] = {"device": found, "from": how}
    if spec_timings is not None:
        model, prov["spec_round_time"] = _spec_round_time(
            model, config, spec_timings, spec_reference, spec_reference_argv, engine,
            engine_version,
        )  # fmt: skip
    if out is not None:
        write_cost_model(out, model, prov)
        click.echo(f"wrote {out}", err=True)
    doc = dataclasses.asdict(model)
    if fmt == "json":
        # The coefficients at the top level (as before) plus where they came from.
        click.echo(json.dumps({**doc, "provenance": prov}, indent=1))
        return
    for k, v in doc.items():
        click.echo(f"{k:<24}{v:.4g}" if isinstance(v, float) else f"{k:<24}{v}")
    for k, v in (prov.get("residuals") or {}).items():
        click.echo(f"residual {k:<15}{v:.4g}" if isinstance(v, float) else f"residual {k:<15}{v}")
    acc = prov.get("acceptance")
    if acc:
        dist = ", ".join(f"{p:.3f}" for p in acc["distribution"]) or "not exported"
        click.echo(
            f"acceptance ({acc['engine']}): {acc['mean_length']:.3f} tokens per verify round; "
            f"accepted-drafts distribution P(0..n) {dist}; {acc['method']}"
        )
    rt = prov.get("spec_round_time")
    if rt:
        click.echo(
            f"speculative round: +{rt['extra_per_round_s'] * 1e3:.3f} ms beyond the forwards "
            f"(TPOT p50 measured {rt['tpot_measured_p50_s'] * 1e3:.2f} ms, simulated "
            f"{rt['tpot_simulated_p50_s_before'] * 1e3:.2f} -> "
            f"{rt['tpot_simulated_p50_s_after'] * 1e3:.2f} ms over {rt['requests']} requests)"
        )


def _fit_device(option: str, source: str, engine: str) -> tuple[str, str]:
    """``sim fit --device``: the device named, or (auto) the one the engine log's start-up
    line names; a fit's device is never the base preset's (that is another machine)."""
    from pathlib import Path

    from tierctl.engines import profile_for
    from tierctl.runtime.metrics_source import is_url
    from tierctl.sim.iteration_fit import read_log

    if option != "auto":
        return ("" if option == "unknown" else option), "--device"
    if is_url(source) or not Path(source).is_file():
        return "", "unknown (--device auto: no log to read it from)"
    seen = profile_for(engine).log_device(read_log(Path(source)))
    if seen in ("cuda", "cpu"):
        return seen, "the engine log's start-up line"
    return "", "unknown (the log names no device; give --device)"


def _spec_round_time(
    model: Any,
    config: Any,
    timings: str,
    reference: str | None,
    reference_argv: str | None,
    engine: str | None,
    version: str | None,
) -> tuple[Any, dict[str, Any]]:
    """``sim fit --spec-timings``: the speculative round's time from a bench results file
    (and a reference run of the same trace without speculation)."""
    import shlex

    from tierctl.errors import InputError
    from tierctl.results import read_results
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.spec_timing import fit_spec_round_time

    def measured(path: str) -> list[Any]:
        res = read_results(path)
        return [r for run in res.runs for r in run.completed_requests(res.source)]

    ref = None
    if reference is not None or reference_argv is not None:
        if reference is None or not reference_argv:
            raise InputError(
                "--spec-reference and --spec-reference-argv go together",
                rule="the reference run's results and the argv its engine ran with",
                fix="pass both, or neither (the speculative run alone is then fitted)",
            )
        ref_cfg = EngineConfig.from_argv(
            shlex.split(reference_argv), engine=engine, version=version, strict=True
        )
        ref = (ref_cfg, measured(reference))
    return fit_spec_round_time(model, config, measured(timings), ref)


@sim.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--time-scale",
    type=click.FloatRange(min=1e-3),
    default=1.0,
    show_default=True,
    help="Modelled seconds per wall second (50 = 50x faster than the GPU).",
)
@_ENGINE
@_PRESET
@click.option(
    "--queue-full-status",
    type=click.IntRange(400, 599),
    default=503,
    show_default=True,
    help="HTTP status when --max-queued-requests is exceeded.",
)
@click.option("--drain-timeout-s", type=float, default=30.0, show_default=True)
@click.option(
    "--lm-seed",
    type=int,
    help="Seed of the simulated model's tokens and logprobs (default: from --model-path).",
)
@click.option(
    "--perturb-tokens",
    "perturb_fraction",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Fraction of positions whose two likeliest tokens swap (tests the quality lane).",
)
@click.option("--perturb-seed", type=int, default=1, show_default=True)
@click.option(
    "--max-body-mib",
    type=click.FloatRange(min=0.001),
    default=256.0,
    show_default=True,
    help="Hard limit on one request body; a bigger one gets 413 while it is being read.",
)
@click.option(
    "--body-timeout-s",
    type=click.FloatRange(min=0.001),
    default=60.0,
    show_default=True,
    help="How long a client may take to send a body (408 past it; time the server was busy "
    "does not count).",
)
@click.option(
    "--header-timeout-s",
    type=click.FloatRange(min=0.001),
    default=10.0,
    show_default=True,
    help="How long a client may take to send a request's headers (408 and closed past it).",
)
@click.option(
    "--health-generation/--no-health-generation",
    default=None,
    help="SGLang: /health runs the one-token check of /health_generate (answered at the first "
    "1 s poll that sees engine output), as SGLang does by default. Default: "
    "$SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION when set, else off (/health answers at once).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def serve(
    time_scale: float,
    engine: str | None,
    engine_version: str | None,
    queue_full_status: int,
    drain_timeout_s: float,
    lm_seed: int | None,
    perturb_fraction: float,
    perturb_seed: int,
    max_body_mib: float,
    body_timeout_s: float,
    header_timeout_s: float,
    health_generation: bool | None,
    argv: tuple[str, ...],
    **kw: Any,
) -> None:
    """Serve an engine: `tierctl sim serve --time-scale 50 -- --port 30001 ...`.

    With a vLLM argv (`-- vllm serve MODEL ...`, or --engine vllm) it answers as vLLM does:
    its routes, its `vllm:` metrics, its defaults.
    """
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.server import ServeOptions
    from tierctl.sim.server import serve as run_server

    cost = _cost(kw)
    # Strict: a flag the pinned release's parser does not know stops the server at start-up
    # with exit 2, as the engine's own parser does (a bad-flag canary must fail its rollout's
    # health gate here too, not serve).
    lenient = EngineConfig.from_argv(list(argv), engine=engine, version=engine_version)
    _refuse_own_options_in_argv(argv, lenient)  # the more useful message for tierctl's own
    config = EngineConfig.from_argv(list(argv), engine=engine, version=engine_version, strict=True)
    if not math.isfinite(time_scale):  # FloatRange lets NaN and inf through
        raise click.BadParameter(f"{time_scale} is not a finite number", param_hint="--time-scale")
    if not 0 <= config.port <= 65535:  # bind() raised OverflowError on 70000
        raise click.UsageError(f"--port {config.port} is not a port (0 to 65535)")
    opts = ServeOptions(
        time_scale=time_scale,
        queue_full_status=queue_full_status,
        drain_timeout_s=drain_timeout_s,
        lm_seed=lm_seed,
        perturb_fraction=perturb_fraction,
        perturb_seed=perturb_seed,
        max_body_bytes=int(max_body_mib * 1024 * 1024),
        body_timeout_s=body_timeout_s,
        header_timeout_s=header_timeout_s,
        health_generation=_health_generation(health_generation),
    )
    asyncio.run(run_server(config, cost, opts, announce=lambda s: click.echo(s, nl=True)))


def _refuse_own_options_in_argv(argv: tuple[str, ...], config: EngineConfig) -> None:
    """After the engine argv begins (its first token, ``--`` or not) every token is the
    engine's: one of ``sim serve``'s own options there would be kept verbatim as an engine
    flag and silently not applied (``sim serve --port 0 --time-scale nan`` served at scale 1
    for ever). Refused when the pinned release has no flag of that name, as it would."""
    own = {o for p in serve.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
    for token in argv:
        name = token.split("=", 1)[0]
        if name in own and config.release_lacks(name):
            raise click.UsageError(
                f"{name} is among the engine's arguments, and {config.engine} {config.release} "
                f"has no such flag: it is tierctl's own option and goes before the engine argv "
                f"(`tierctl sim serve {name} ... -- --port ...`)"
            )


def _health_generation(flag: bool | None) -> bool:
    """The flag, else SGLang's own switch from the environment (SGLang's truthy spellings)."""
    if flag is not None:
        return flag
    env = os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION")
    return env is not None and env.strip().lower() in ("1", "true", "yes", "on")


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def _render_run(result: SimResult, per_request: bool) -> str:
    s: SimSummary = result.summary
    lines = [
        f"workload {result.workload}: {s.requests} requests, preset {result.preset}",
        f"completed {s.completed} ({s.completion:.1%}), aborted/rejected {s.aborted}, "
        f"KV admission waits {s.kv_waits}, cached prompt tokens {s.cached_fraction:.1%}",
        f"rounds {result.rounds} (prefill {result.prefill_rounds}, deferred "
        f"{result.deferred_rounds}), simulated {result.sim_end_s:.1f} s",
        f"TTFT  p50 {_fmt(s.ttft_p50_s)} s  p95 {_fmt(s.ttft_p95_s)} s  p99 {_fmt(s.ttft_p99_s)} s",
        f"TPOT  p50 {_fmt(s.tpot_p50_s)} s  p90 {_fmt(s.tpot_p90_s)} s  p99 {_fmt(s.tpot_p99_s)} s",
        f"ITL   p50 {_fmt(s.itl_p50_s)} s  p99 {_fmt(s.itl_p99_s)} s",
        f"queue p50 {_fmt(s.queue_p50_s)} s  p95 {_fmt(s.queue_p95_s)} s",
        f"stall longest {_fmt(s.stall_max_s)} s  in-burst ITL mean {_fmt(s.burst_itl_mean_s)} s"
        f" (worst request {_fmt(s.burst_itl_max_mean_s)} s), preemptions {s.preemptions}",
    ]
    if s.probes:
        lines.append(
            f"health probes {s.probes}: p99 {_fmt(s.probe_p99_s)} s, worst {_fmt(s.probe_max_s)} s,"
            f" {s.probe_misses} over 3 s, {s.unhealthy_flips} unhealthy flips (3 misses in a row)"
        )
    if per_request:
        lines.append(
            f"{'rid':<14}{'arrival':>9}{'input':>9}{'cached':>9}{'out':>6}"
            f"{'queue':>9}{'ttft':>9}{'tpot':>8}{'status':>11}"
        )
        for r in result.requests:
            lines.append(
                f"{r.rid:<14}{r.arrival_s:>9.1f}{r.input_tokens:>9}{r.cached_tokens:>9}"
                f"{r.output_tokens:>6}{_fmt(r.queue_s):>9}{_fmt(r.ttft_s):>9}"
                f"{_fmt(r.tpot_s):>8}{r.status:>11}"
            )
    return "\n".join(lines)
