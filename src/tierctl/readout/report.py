"""Readout as a terminal table or Markdown, shaped like the field reports' ratio tables."""

from __future__ import annotations

import math

from rich.console import Console

from tierctl.quantity import Unit
from tierctl.readout.analysis import Readout
from tierctl.readout.fleet import FleetReadout
from tierctl.tables import Col, FitTable

_COLOURS = {
    "better": "green",
    "same": "white",
    "worse": "red",
    "inconclusive": "yellow",
    "no-data": "yellow",
    "pass": "green",
    "fail": "red",
}


def _f(value: float, unit: Unit) -> str:
    """A median with its unit: durations in ms or s, rates with theirs."""
    if math.isnan(value):
        return "-"
    if unit is Unit.SECONDS:
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:.3g} {unit.shown_as}"


def _rows(readout: Readout | FleetReadout) -> list[list[str]]:
    """One row per metric: the medians in the metric's unit, canary/control (for every
    metric, whatever its direction), and whether the canary is better or worse."""
    rows = []
    for m in readout.metrics:
        r = m.result
        ratio = "-" if math.isnan(r.ratio) else f"{r.ratio:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
        rows.append(
            [
                m.title + (" (guard)" if m.guard else ""),
                "lower" if r.lower_is_better else "higher",
                _f(m.control_median, m.unit),
                _f(m.canary_median, m.unit),
                ratio,
                "-" if math.isnan(r.p_value) else f"{r.p_value:.3g}",
                f"{r.n_used}/{r.n_steps}",
                r.verdict,
            ]
        )
    a = readout.aborts
    rows.append(
        [
            "aborted requests (guard)",
            "lower",
            f"{a.control_events:.0f}/{a.control_total:.0f}",
            f"{a.canary_events:.0f}/{a.canary_total:.0f}",
            "-"
            if math.isnan(a.rate_ratio)
            else f"{a.rate_ratio:.2f} [{a.ci_low:.2f}, {a.ci_high:.2f}]",
            "-" if math.isnan(a.p_value) else f"{a.p_value:.3g}",
            "pooled",
            a.verdict,
        ]
    )
    return rows


#: "better": which way the metric improves; "canary is": the verdict that direction gives the
#: canary/control ratio (a throughput ratio of 1.09 is better, a latency ratio of 1.09 worse).
HEADERS = [
    "metric",
    "better",
    "control",
    "canary",
    "canary/control [95% CI]",
    "p",
    "steps",
    "canary is",
]


def print_readout(readout: Readout, console: Console) -> None:
    """The readout as a rich table with the verdict and its reasons."""
    c, k = readout.control, readout.canary
    rows = _rows(readout)
    for row in rows:
        row[-1] = f"[{_COLOURS.get(row[-1], 'white')}]{row[-1]}[/]"
    console.print(
        FitTable(
            [Col(h, key=h == "metric") for h in HEADERS],
            rows,
            title=f"readout: canary {k.replica} vs control {c.replica} "
            f"({(readout.end_s - readout.start_s) / 3600:.1f} h, step {readout.step_s:g} s)",
        )
    )
    for arm in (c, k):
        console.print(
            f"{arm.replica}: variants seen {readout.variants_seen.get(arm.replica) or '-'}"
        )
    for w in readout.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    colour = _COLOURS[readout.verdict]
    console.print(f"verdict: [{colour}]{readout.verdict.upper()}[/] — {'; '.join(readout.reasons)}")


def readout_markdown(readout: Readout) -> str:
    """The readout as a Markdown section."""
    c, k = readout.control, readout.canary
    lines = [
        f"## Readout: canary {k.replica} vs control {c.replica}",
        "",
        f"Window {(readout.end_s - readout.start_s) / 3600:.1f} h in steps of "
        f"{readout.step_s:g} s; metric prefix `{readout.prefix}`.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(readout)]
    lines += ["", f"**Verdict: {readout.verdict}** — {'; '.join(readout.reasons)}"]
    lines += [f"- warning: {w}" for w in readout.warnings]
    return "\n".join(lines) + "\n"


def _host_rows(readout: FleetReadout) -> tuple[list[str], list[list[str]]]:
    """Per host: its role and each metric's ratio (after/before, or canary/control)."""
    keys = [m.key for m in readout.metrics]
    headers = ["host", "role", *[m.title for m in readout.metrics]]
    rows = []
    for h in readout.hosts:
        cells = []
        for k in keys:
            r = h.ratios.get(k, math.nan)
            said = "-" if math.isnan(r) else f"{r:.2f}"
            verdict = h.verdicts.get(k)
            cells.append(f"{said} {verdict}" if verdict else said)
        rows.append([h.host, h.role, *cells])
    return headers, rows


def _fleet_titles(readout: FleetReadout) -> tuple[str, str]:
    """(the per-host table's title, the pooled table's)."""
    hours = (readout.end_s - readout.start_s) / 3600
    if readout.design == "between-hosts":
        per = (
            f"per host: its change from its own baseline, relative to the (other) control "
            f"hosts' ({hours:.1f} h after the change)"
        )
        pooled = "pooled: canary hosts' change vs control hosts' change"
    else:
        per = f"per host: canary/control inside the host ({hours:.1f} h)"
        pooled = "pooled over hosts: canary/control"
    return per, pooled


def print_fleet_readout(readout: FleetReadout, console: Console) -> None:
    """The fleet readout: the design, per-host rows, the pooled table, the verdict."""
    console.print(f"design: [bold]{readout.design}[/]: {readout.design_text}")
    per, pooled = _fleet_titles(readout)
    headers, rows = _host_rows(readout)
    console.print(FitTable([Col(h, key=h == "host") for h in headers], rows, title=per))
    rows = _rows(readout)
    for row in rows:
        row[-1] = f"[{_COLOURS.get(row[-1], 'white')}]{row[-1]}[/]"
    console.print(
        FitTable(
            [Col(h, key=h == "metric") for h in HEADERS], rows,
            title=f"{pooled} (step {readout.step_s:g} s)",
        )
    )  # fmt: skip
    for w in readout.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    colour = _COLOURS[readout.verdict]
    console.print(f"verdict: [{colour}]{readout.verdict.upper()}[/] — {'; '.join(readout.reasons)}")


def fleet_readout_markdown(readout: FleetReadout) -> str:
    """The fleet readout as a Markdown section."""
    per, pooled = _fleet_titles(readout)
    headers, host_rows = _host_rows(readout)
    lines = [
        "## Fleet readout",
        "",
        f"Design `{readout.design}`: {readout.design_text}. Metric prefix `{readout.prefix}`.",
        "",
        f"### {per}",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(row) + " |" for row in host_rows),
        "",
        f"### {pooled}",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *("| " + " | ".join(row) + " |" for row in _rows(readout)),
        "",
        f"**Verdict: {readout.verdict}** — {'; '.join(readout.reasons)}",
    ]
    lines += [f"- warning: {w}" for w in readout.warnings]
    return "\n".join(lines) + "\n"
