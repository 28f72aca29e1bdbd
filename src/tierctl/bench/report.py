"""Reports of a run or an A/B: JSON with every raw sample, Markdown, and rich tables.

The JSON is the bench results file (its format: :mod:`tierctl.results`), the record of truth (every request and probe sample, every block, the workload);
Markdown and the terminal tables are views of it. The A/B table has the field report's shape:
one row per workload lane, one B/A ratio per metric with its bootstrap interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from rich.markup import escape

from tierctl.bench.ab import ABResult, MetricRatio
from tierctl.bench.clientcheck import verdict_line
from tierctl.bench.peers import peer_metrics
from tierctl.bench.probe import unhealthy_episodes
from tierctl.bench.samples import RequestSample, RunRecord
from tierctl.bench.summary import METRICS, BenchSummary, summarize_samples
from tierctl.bench.workload import BenchWorkload
from tierctl.quantity import Unit, format_value
from tierctl.results import results_document
from tierctl.tables import Col, FitTable


def _tool() -> str:
    try:
        return f"tierctl {version('tierctl')}"
    except PackageNotFoundError:
        return "tierctl (source tree)"


def record_json(record: RunRecord, misses_to_mark: int = 3) -> dict[str, Any]:
    """One run as plain data: counts, summary, every sample, probe episodes."""
    requests = []
    for r in record.requests:
        row = dataclasses.asdict(r)
        row["tpot_s"] = r.tpot_s
        requests.append(row)
    lanes = sorted({r.lane for r in record.requests})
    return {
        "url": record.url,
        "label": record.label,
        "started_at": record.started_at,
        "duration_s": record.duration_s,
        "planned": record.planned,
        "sent": record.sent,
        "completed": record.count("completed"),
        "failed": record.count("failed"),
        "timed_out": record.count("timed_out"),
        "interrupted": record.interrupted,
        "client_cpu_s": record.client_cpu_s,
        "client_bound": record.client_bound,
        "client_check": None if record.client is None else record.client.to_dict(),
        "warnings": list(record.warnings),
        "summary": _summary_json(summarize_samples(record.requests, record.probes)),
        "lanes": {
            lane: _summary_json(summarize_samples([r for r in record.requests if r.lane == lane]))
            for lane in lanes
        },
        "unhealthy_episodes": [
            dataclasses.asdict(e) for e in unhealthy_episodes(record.probes, misses_to_mark)
        ],
        "peer_definitions": [dataclasses.asdict(m) for m in peer_metrics(record.requests)],
        "requests": requests,
        "probes": [dataclasses.asdict(p) for p in record.probes],
    }


def run_json(record: RunRecord, workload: BenchWorkload) -> dict[str, Any]:
    """The JSON document of ``tierctl bench run``."""
    return results_document(
        "run",
        _tool(),
        workload.model_dump(mode="json"),
        {"run": record_json(record, workload.probe.unhealthy_after)},
    )


def ab_json(
    result: ABResult, ratios: Sequence[MetricRatio], workload: BenchWorkload
) -> dict[str, Any]:
    """The JSON document of ``tierctl bench ab``: ratios plus every block's raw samples."""
    body = {
        "a_url": result.a_url,
        "b_url": result.b_url,
        "order": result.order,
        "repetitions": result.repetitions,
        "interrupted": result.interrupted,
        "client_bound": ab_client_bound(result),
        "pairs": len(result.pairs()),
        "ratios": [
            {
                "lane": m.lane or "all",
                "metric": m.metric,
                "unit": m.quantity.unit.value,
                "better_when": m.quantity.direction.value,
                "b_is": m.change,
                **dataclasses.asdict(m.ratio),
            }
            for m in ratios
        ],
        "blocks": [
            {
                "repetition": b.repetition,
                "position": b.position,
                "arm": b.arm,
                "flush": b.flush,
                **record_json(b.record, workload.probe.unhealthy_after),
            }
            for b in result.blocks
        ],
    }
    return results_document("ab", _tool(), workload.model_dump(mode="json"), body)


def ab_client_bound(result: ABResult) -> bool:
    """Whether any block of an A/B was client-bound (then its ratios are suspect)."""
    return any(b.record.client_bound for b in result.blocks)


def ab_client_line(result: ABResult) -> str:
    """One line on the client-bottleneck check over an A/B's blocks."""
    bound = [f"{k} ({b.arm})" for k, b in enumerate(result.blocks) if b.record.client_bound]
    if bound:
        return (
            f"CLIENT-BOUND in block(s) {', '.join(bound)}: the ratios may compare the "
            "client's limits, not the servers (reasons under warnings)"
        )
    return f"client kept up in all {len(result.blocks)} blocks"


def _summary_json(s: BenchSummary) -> dict[str, Any]:
    d = dataclasses.asdict(s)
    d["completion_pct"] = s.completion_pct
    return d


def _ms(x: float | None) -> str:
    return format_value(x, Unit.SECONDS)


def _num(x: float | None) -> str:
    return format_value(x, Unit.TOKENS_PER_SECOND)


def _ratio_cell(m: MetricRatio) -> str:
    r = m.ratio
    if r.ratio is None or m.quantity.is_count:
        return f"{m.quantity.cell(r.a)} → {m.quantity.cell(r.b)}"
    ci = "" if r.ci_low is None else f" ({r.ci_low:.2f}-{r.ci_high:.2f})"
    return f"{r.ratio:.2f}{ci}"


def _ab_rows(ratios: Sequence[MetricRatio]) -> tuple[list[str], list[list[str]]]:
    """Per lane four rows: arm A's own values, arm B's, B/A (with its 95% CI), and whether
    B is better or worse (from each metric's direction: B/A < 1 is better for a latency,
    worse for a throughput)."""
    header = ["workload", "arm", *[q.label for q in METRICS.values()]]
    rows: list[list[str]] = []
    for lane in dict.fromkeys(m.lane for m in ratios):
        cells = {m.metric: m for m in ratios if m.lane == lane}
        name = lane or "all"
        for arm in ("A", "B"):
            values = []
            for metric in METRICS:
                m = cells.get(metric)
                value = None if m is None else (m.ratio.a if arm == "A" else m.ratio.b)
                values.append("" if m is None else m.quantity.cell(value))
            rows.append([name, arm, *values])
        rows.append([name, "B/A", *[_ratio_cell(cells[n]) if n in cells else "" for n in METRICS]])
        rows.append([name, "B is", *[cells[n].change if n in cells else "" for n in METRICS]])
    return header, rows


AB_ROWS_PER_LANE = 4


def ab_table(result: ABResult, ratios: Sequence[MetricRatio]) -> FitTable:
    """Each arm's own values (latencies in ms), B/A (95% bootstrap CI) and better/worse per
    metric; fits the terminal it is printed on."""
    header, rows = _ab_rows(ratios)
    return FitTable(
        [Col(h, key=h in ("workload", "arm")) for h in header],
        # The lane names come from the workload file: cells are markup, names are not.
        [[escape(r[0]), *r[1:]] for r in rows],
        title=f"A = {result.a_url}, B = {result.b_url}: {len(result.pairs())} paired blocks, "
        f"order {result.order}, {result.repetitions} repetition(s); arms' values pooled over "
        "blocks (latencies in ms), B/A: ratio (95% CI) for every metric, counts: A → B; "
        "B is: better or worse by each metric's direction",
        section_every=AB_ROWS_PER_LANE,
    )


#: The run table's columns after the counts: (header, summary field, unit).
_RUN_FIGURES: tuple[tuple[str, str, Unit], ...] = (
    ("TTFT p50", "ttft_p50_s", Unit.SECONDS),
    ("TTFT p95", "ttft_p95_s", Unit.SECONDS),
    ("TTFT p99", "ttft_p99_s", Unit.SECONDS),
    ("TPOT p50", "tpot_p50_s", Unit.SECONDS),
    ("TPOT p90", "tpot_p90_s", Unit.SECONDS),
    ("ITL p50", "itl_p50_s", Unit.SECONDS),
    ("ITL p90", "itl_p90_s", Unit.SECONDS),
    ("E2E p50", "e2e_p50_s", Unit.SECONDS),
    ("lag p99", "queue_p99_s", Unit.SECONDS),
    ("tok/s", "output_tok_per_s", Unit.TOKENS_PER_SECOND),
    ("req/s", "requests_per_s", Unit.REQUESTS_PER_SECOND),
)


def run_table(record: RunRecord) -> FitTable:
    """Per-lane and overall summary of one run (latencies in ms); fits the terminal."""
    cols = [Col("lane", key=True), Col("sent"), Col("ok"), Col("no TTFT"), Col("failed")]
    cols += [Col("timeout"), *(Col(h) for h, _, _ in _RUN_FIGURES)]
    lanes = sorted({r.lane for r in record.requests})
    groups = [(lane, [r for r in record.requests if r.lane == lane]) for lane in lanes]
    if len(groups) != 1:
        groups.append(("all", list(record.requests)))
    rows = []
    for name, reqs in groups:
        s = summarize_samples(reqs)
        counts = [str(s.sent), str(s.completed), str(s.no_ttft), str(s.failed), str(s.timed_out)]
        figures = [format_value(getattr(s, f), unit) for _, f, unit in _RUN_FIGURES]
        rows.append([escape(name), *counts, *figures])  # a lane name is not markup
    return FitTable(cols, rows, title=f"{record.url} ({record.duration_s:.1f} s; latencies in ms)")


def no_ttft_line(requests: Sequence[RequestSample]) -> str | None:
    """A line on completed requests that had no TTFT (no content chunk), or None when none:
    they are left out of the TTFT and TPOT percentiles, which the reader must know."""
    s = summarize_samples(requests)
    if not s.no_ttft:
        return None
    return (
        f"{s.no_ttft} of {s.completed} completed requests had no TTFT (their stream carried no "
        "content chunk): left out of the TTFT and TPOT percentiles"
    )


def probe_line(record: RunRecord, misses_to_mark: int = 3) -> str:
    """One line on the probe lane: latency p50/p99/max, misses, unhealthy episodes."""
    s = summarize_samples([], record.probes, misses_to_mark=misses_to_mark)
    return (
        f"probes {s.probes}: p50 {_ms(s.probe_p50_s)} ms, p99 {_ms(s.probe_p99_s)} ms, "
        f"max {_ms(s.probe_max_s)} ms, misses {s.probe_misses}, "
        f"marked-unhealthy episodes ({misses_to_mark} misses) {s.unhealthy_episodes}"
    )


def run_markdown(record: RunRecord, workload: BenchWorkload) -> str:
    """Markdown report of one run."""
    lines = [f"# tierctl bench run: {workload.name}", "", f"- endpoint: `{record.url}`"]
    lines += [
        f"- started: {record.started_at}, duration {record.duration_s:.1f} s",
        f"- sent {record.sent} = completed {record.count('completed')} + failed "
        f"{record.count('failed')} + timed out {record.count('timed_out')}"
        + (" (interrupted)" if record.interrupted else ""),
        f"- {probe_line(record, workload.probe.unhealthy_after)}",
        f"- {verdict_line(record.client)}",
        "",
        "| lane | sent | ok | no TTFT | TTFT p50 ms | TTFT p95 ms | TTFT p99 ms | TPOT p50 ms | "
        "TPOT p90 ms | ITL p50 ms | ITL p90 ms | E2E p50 ms | output tok/s | req/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lane in sorted({r.lane for r in record.requests}):
        s = summarize_samples([r for r in record.requests if r.lane == lane])
        lines.append(
            f"| {lane} | {s.sent} | {s.completed} | {s.no_ttft} | {_ms(s.ttft_p50_s)} | {_ms(s.ttft_p95_s)} | "
            f"{_ms(s.ttft_p99_s)} | {_ms(s.tpot_p50_s)} | {_ms(s.tpot_p90_s)} | "
            f"{_ms(s.itl_p50_s)} | {_ms(s.itl_p90_s)} | {_ms(s.e2e_p50_s)} | "
            f"{_num(s.output_tok_per_s)} | {_num(s.requests_per_s)} |"
        )
    lines += _peer_lines({"value": list(record.requests)})
    missing = no_ttft_line(record.requests)
    lines += _warning_lines([*record.warnings, *([missing] if missing else [])])
    return "\n".join(lines) + "\n"


def _peer_lines(arms: dict[str, list[Any]]) -> list[str]:
    """TPOT and ITL under each peer tool's definition (docs/metrics.md), p50 and p90."""
    tables = {arm: peer_metrics(reqs) for arm, reqs in arms.items()}
    names = list(arms)
    head = " | ".join(
        f"{a} p50 ms | {a} p90 ms" if len(names) > 1 else "p50 ms | p90 ms" for a in names
    )
    lines = [
        "",
        "## TPOT and ITL by each tool's definition",
        "",
        "The same requests, measured as each tool defines the figure (see docs/metrics.md).",
        "",
        f"| tool | its metric | definition | per | {head} |",
        "|---|---|---|---|" + "---:|---:|" * len(names),
    ]
    first = tables[names[0]]
    for k, m in enumerate(first):
        cells = " | ".join(f"{_ms(tables[a][k].p50_s)} | {_ms(tables[a][k].p90_s)}" for a in names)
        lines.append(f"| {m.tool} | {m.metric} | {m.formula} | {m.per} | {cells} |")
    return lines


def ab_markdown(result: ABResult, ratios: Sequence[MetricRatio], workload: BenchWorkload) -> str:
    """Markdown report of a paired A/B."""
    header, rows = _ab_rows(ratios)
    lines = [
        f"# tierctl bench ab: {workload.name}",
        "",
        f"- A: `{result.a_url}`",
        f"- B: `{result.b_url}`",
        f"- order {result.order}, {result.repetitions} repetition(s), "
        f"{len(result.pairs())} paired blocks" + (" (interrupted)" if result.interrupted else ""),
        f"- {ab_client_line(result)}",
        "- rows A and B: each arm's own values pooled over its blocks (latencies in ms); "
        "row B/A: the ratio B/A for every metric (95% bootstrap CI over paired blocks); counts: "
        "A → B; row B is: better or worse by the metric's direction (lower latency, higher "
        "throughput)",
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        "## Blocks",
        "",
        "| # | rep | arm | sent | ok | failed | timed out | probe p50 ms | probe p99 ms | "
        "probe max ms | probe misses | unhealthy episodes | flush | client |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for k, b in enumerate(result.blocks):
        rec = b.record
        ps = summarize_samples([], rec.probes, misses_to_mark=workload.probe.unhealthy_after)
        lines.append(
            f"| {k} | {b.repetition} | {b.arm} | {rec.sent} | {rec.count('completed')} | "
            f"{rec.count('failed')} | {rec.count('timed_out')} | {_ms(ps.probe_p50_s)} | "
            f"{_ms(ps.probe_p99_s)} | {_ms(ps.probe_max_s)} | {ps.probe_misses} | "
            f"{ps.unhealthy_episodes} | {b.flush or '-'} | "
            f"{_client_cell(rec)} |"
        )
    arms: dict[str, list[Any]] = {"A": [], "B": []}
    for b in result.blocks:
        arms[b.arm].extend(b.record.requests)
    lines += _peer_lines(arms)
    warnings = [
        f"block {k} ({b.arm}): {w}" for k, b in enumerate(result.blocks) for w in b.record.warnings
    ]
    for arm, reqs in arms.items():
        missing = no_ttft_line(reqs)
        if missing:
            warnings.append(f"arm {arm}: {missing}")
    lines += _warning_lines(warnings)
    return "\n".join(lines) + "\n"


def _client_cell(record: RunRecord) -> str:
    if record.client is None:
        return "-"
    return "client-bound" if record.client_bound else "kept up"


def _warning_lines(warnings: Sequence[str]) -> list[str]:
    if not warnings:
        return []
    return ["", "## Warnings", "", *(f"- {w}" for w in warnings)]
