"""Readout as a terminal table or Markdown, shaped like the field reports' ratio tables."""

from __future__ import annotations

import math

from rich.console import Console

from tierctl.quantity import Unit
from tierctl.readout.analysis import Readout
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


def _rows(readout: Readout) -> list[list[str]]:
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
