"""Figures carry their unit by type, ratios are B/A with a separate better/worse row, requests
without a TTFT are counted, and terminal tables fit their width without cutting a number."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from tierctl.bench.ab import ABResult, Block, compare_arms
from tierctl.bench.report import ab_json, ab_markdown, ab_table, run_markdown, run_table
from tierctl.bench.samples import RequestSample, RunRecord
from tierctl.bench.summary import METRICS, summarize_samples
from tierctl.bench.workload import workload_from_dict
from tierctl.quantity import Direction, Quantity, Unit, format_value, judge_counts, judge_ratio
from tierctl.tables import Col, FitTable

WL = workload_from_dict(
    {"lanes": [{"kind": "burst", "count": 3, "input_tokens": 5, "output_tokens": 5}]}
)


def _req(i: int, *, ttft: float | None, e2e: float, out: int = 101) -> RequestSample:
    return RequestSample(
        index=i,
        lane="burst",
        scheduled_s=0.0,
        sent_s=0.0,
        queue_s=0.0,
        ttft_s=ttft,
        e2e_s=e2e,
        itl_s=(0.001,) * (out - 1),
        input_tokens=5,
        output_tokens=out,
        planned_input_tokens=5,
        outcome="completed",
        error_class=None,
    )


def _record(scale: float, *, no_ttft: int = 0) -> RunRecord:
    reqs = [_req(i, ttft=0.2 * scale, e2e=0.5 * scale) for i in range(4)]
    reqs += [_req(4 + i, ttft=None, e2e=0.5 * scale) for i in range(no_ttft)]
    return RunRecord(
        "http://127.0.0.1:1", "x", "2026-01-01T00:00:00+00:00", 1.0, tuple(reqs), (), 4
    )


def _ab(no_ttft_b: int = 0) -> ABResult:
    # B serves everything in half the time: lower latencies, twice the throughput.
    blocks = (
        Block(0, 0, "A", _record(1.0)),
        Block(0, 1, "B", _record(0.5, no_ttft=no_ttft_b)),
        Block(0, 2, "B", _record(0.5, no_ttft=no_ttft_b)),
        Block(0, 3, "A", _record(1.0)),
    )
    return ABResult("http://a", "http://b", "ABBA", 1, blocks, False)


def _rows(text: str) -> dict[str, str]:
    return {line.split("│")[2].strip(): line for line in text.splitlines() if line.count("│") > 3}


def test_the_ab_tables_output_rate_is_tokens_per_second_not_thousands_of_them():
    # Regression: "output_tok_per_s" ends in "_s" and was printed as a duration in ms.
    result = _ab()
    ratios = compare_arms(result, ["burst"])
    tok = {m.metric: m.ratio for m in ratios}["output_tok_per_s"]
    assert tok.a == pytest.approx(404 / 0.5)  # 4 requests x 101 tokens in 0.5 s
    console = Console(width=400, record=True)
    console.print(ab_table(result, ratios))
    rows = _rows(console.export_text())
    assert " 808 " in rows["A"]
    assert "808000" not in rows["A"]
    md = ab_markdown(result, ratios, WL)
    assert "808000" not in md
    assert re.search(r"\| all \| A \|.*\| 808 \|", md)


def test_ratios_are_b_over_a_for_every_metric_and_a_separate_row_says_better_or_worse():
    result = _ab()
    ratios = {m.metric: m for m in compare_arms(result, ["burst"])}
    # Both are B/A: a latency halves, a throughput doubles; both are better for B.
    assert ratios["ttft_p50_s"].ratio.ratio == pytest.approx(0.5)
    assert ratios["output_tok_per_s"].ratio.ratio == pytest.approx(2.0)
    assert ratios["ttft_p50_s"].change == "better"
    assert ratios["output_tok_per_s"].change == "better"
    console = Console(width=400, record=True)
    console.print(ab_table(result, list(ratios.values())))
    rows = _rows(console.export_text())
    assert "2.00 (2.00-2.00)" in rows["B/A"]
    assert "worse" not in rows["B is"]
    assert rows["B is"].count("better") == 7  # all but ITL (the same gaps in both arms)
    doc = ab_json(result, list(ratios.values()), WL)
    tok = next(r for r in doc["ratios"] if r["metric"] == "output_tok_per_s")
    assert (tok["unit"], tok["better_when"], tok["b_is"]) == ("tok/s", "higher", "better")


def test_every_metric_declares_its_unit_and_no_rate_is_a_duration():
    for name, q in METRICS.items():
        assert isinstance(q, Quantity)
        if "per_s" in name:
            assert q.unit is not Unit.SECONDS, name
            assert q.direction is Direction.HIGHER_IS_BETTER, name


@given(st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_a_rate_is_printed_as_itself_and_a_duration_in_milliseconds(value):
    rate = float(format_value(value, Unit.TOKENS_PER_SECOND))
    assert rate == pytest.approx(value, abs=0.05 + 1e-9)  # one decimal, rounded
    ms = float(format_value(value, Unit.SECONDS))
    assert ms == pytest.approx(value * 1e3, rel=5e-3, abs=5e-3)


@given(
    st.floats(min_value=0.01, max_value=100.0),
    st.floats(min_value=1.0, max_value=3.0),
    st.sampled_from(list(Direction)),
)
def test_a_ratio_and_its_inverse_are_judged_opposite_ways(ratio, spread, direction):
    low, high = ratio / spread, ratio * spread
    inverse = judge_ratio(1 / high, 1 / low, direction)
    opposite = {"better": "worse", "worse": "better", "same": "same", "unclear": "unclear"}
    assert judge_ratio(low, high, direction) == opposite[inverse]


def test_counts_are_judged_by_their_direction():
    assert judge_counts(3, 1, Direction.LOWER_IS_BETTER) == "better"
    assert judge_counts(90.0, 100.0, Direction.HIGHER_IS_BETTER) == "better"
    assert judge_counts(1, 1, Direction.LOWER_IS_BETTER) == "same"


def test_requests_without_a_ttft_are_counted_and_shown():
    rec = _record(1.0, no_ttft=2)
    s = summarize_samples(rec.requests)
    assert (s.completed, s.no_ttft) == (6, 2)
    md = run_markdown(rec, WL)
    assert "| burst | 6 | 6 | 2 |" in md
    assert "2 of 6 completed requests had no TTFT" in md
    console = Console(width=400, record=True)
    console.print(run_table(rec))
    assert "no TTFT" in console.export_text()
    result = _ab(no_ttft_b=1)
    ratios = {m.metric: m for m in compare_arms(result, ["burst"])}
    assert (ratios["no_ttft"].ratio.a, ratios["no_ttft"].ratio.b) == (0, 2)
    assert ratios["no_ttft"].change == "worse"
    assert "arm B: 2 of 10 completed requests had no TTFT" in ab_markdown(
        result, list(ratios.values()), WL
    )


def _render(table: FitTable, width: int) -> str:
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_the_run_and_ab_tables_fit_the_terminal_without_cutting_a_number(width):
    # Regression: at 120 columns the run table printed "184…" for a figure.
    reqs = [_req(i, ttft=1.84321 + i, e2e=18.4321 + i, out=1001) for i in range(6)]
    rec = RunRecord("http://127.0.0.1:1", "x", "t", 30.0, tuple(reqs), (), 6)
    result = _ab()
    for table in (run_table(rec), ab_table(result, compare_arms(result, ["burst"]))):
        text = _render(table, width)
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width
        for row in table.rows:
            for cell in row[1:]:
                assert cell in text, (width, cell)


def test_a_table_too_wide_is_split_into_parts_that_each_repeat_the_key_column():
    cols = [Col("lane", key=True), *(Col(f"figure {k}") for k in range(12))]
    table = FitTable(cols, [["burst", *(f"{1234.5 + k}" for k in range(12))]], title="t")
    parts = table.parts(60)
    assert len(parts) > 1
    assert all(p[0] == 0 for p in parts)
    assert sorted({k for p in parts for k in p}) == list(range(13))
    text = _render(table, 60)
    assert text.count("burst") == len(parts)
    assert "…" not in text
