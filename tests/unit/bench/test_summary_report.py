"""Summaries (metric definitions) and the reports built from them."""

from __future__ import annotations

import orjson
import pytest

from tierctl.bench.ab import ABResult, Block, compare_arms
from tierctl.bench.report import ab_json, ab_markdown, run_json, run_markdown
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.summary import summarize_samples
from tierctl.bench.workload import workload_from_dict

WL = workload_from_dict(
    {"lanes": [{"kind": "burst", "count": 3, "input_tokens": 5, "output_tokens": 5}]}
)


def _req(i: int, *, ttft=1.0, e2e=3.0, out=5, outcome="completed", lane="burst", cls=None):
    return RequestSample(
        index=i,
        lane=lane,
        scheduled_s=0.0,
        sent_s=0.01 * i,
        queue_s=0.01 * i,
        ttft_s=ttft,
        e2e_s=e2e,
        itl_s=(0.5,) * max(0, out - 1),
        input_tokens=5,
        output_tokens=out,
        planned_input_tokens=5,
        outcome=outcome,
        error_class=cls,
    )


def _record(scale: float = 1.0, label: str = "A") -> RunRecord:
    reqs = (
        _req(0, ttft=1.0 * scale, e2e=3.0 * scale),
        _req(1, ttft=2.0 * scale, e2e=4.0 * scale),
        _req(2, ttft=None, e2e=9.0, out=0, outcome="timed_out", cls="timeout"),
        _req(3, ttft=0.1, e2e=0.2, out=1, outcome="failed", cls="connection"),
    )
    probes = (ProbeSample(0.0, 0.01, 200), *(ProbeSample(float(i), None, None) for i in (1, 2, 3)))
    return RunRecord(
        "http://127.0.0.1:1", label, "2026-01-01T00:00:00+00:00", 10.0, reqs, probes, 4
    )


def test_tpot_excludes_the_first_token():
    # 5 tokens, first at 1 s, last at 3 s: 4 gaps over 2 s.
    assert _req(0).tpot_s == pytest.approx(0.5)
    assert _req(0, out=1).tpot_s is None
    assert _req(0, outcome="failed").tpot_s is None


def test_summary_counts_and_completed_only_latencies():
    s = summarize_samples(_record().requests, _record().probes)
    assert (s.sent, s.completed, s.failed, s.timed_out) == (4, 2, 1, 1)
    assert s.sent == s.completed + s.failed + s.timed_out
    assert s.ttft_p50_s == pytest.approx(1.5)  # failed request's 0.1 s TTFT excluded
    assert s.e2e_p50_s == pytest.approx(3.5)
    assert s.completion_pct == pytest.approx(50.0)
    assert (s.probes, s.probe_misses, s.unhealthy_episodes) == (4, 3, 1)
    assert s.probe_max_s == pytest.approx(0.01)


def test_run_json_keeps_every_sample_and_the_invariant():
    doc = orjson.loads(orjson.dumps(run_json(_record(), WL)))
    run = doc["run"]
    assert len(run["requests"]) == 4
    assert len(run["probes"]) == 4
    assert run["sent"] == run["completed"] + run["failed"] + run["timed_out"]
    assert run["unhealthy_episodes"] == [{"start_s": 3.0, "end_s": None}]
    assert run["requests"][0]["tpot_s"] == pytest.approx(0.5)
    md = run_markdown(_record(), WL)
    assert "| burst | 4 | 2 | 0 | 1500 | 1950 | 1990 | 500.0 |" in md


def _ab() -> ABResult:
    blocks = (
        Block(0, 0, "A", _record(1.0, "A")),
        Block(0, 1, "B", _record(0.5, "B")),
        Block(0, 2, "B", _record(0.5, "B")),
        Block(0, 3, "A", _record(1.0, "A")),
    )
    return ABResult("http://a", "http://b", "ABBA", 1, blocks, False)


def test_ab_pairs_and_ratios():
    result = _ab()
    assert [(a.position, b.position) for a, b in result.pairs()] == [(0, 1), (3, 2)]
    ratios = {m.metric: m.ratio for m in compare_arms(result, ["burst"])}
    assert ratios["ttft_p50_s"].ratio == pytest.approx(0.5)
    assert ratios["e2e_p50_s"].ratio == pytest.approx(0.5)
    assert ratios["completion_pct"].ratio == pytest.approx(1.0)
    assert ratios["probe_misses"].a == 6
    doc = orjson.loads(orjson.dumps(ab_json(result, compare_arms(result, ["burst"]), WL)))
    assert len(doc["blocks"]) == 4
    assert doc["pairs"] == 2
    assert sum(len(b["requests"]) for b in doc["blocks"]) == 16
    md = ab_markdown(result, compare_arms(result, ["burst"]), WL)
    assert "| all | B/A | 0.50 (0.50-0.50) |" in md
    assert "| 0 | 0 | A | 4 | 2 | 1 | 1 | 10.0 | 10.0 | 10.0 | 3 | 1 | - | - |" in md


def test_summary_has_throughput_ttft_p99_and_itl_p50():
    s = summarize_samples(_record().requests)
    # Busy span: first send at 0.00 s to the last end (the timed-out request: 0.02 + 9.0 s).
    assert s.span_s == pytest.approx(9.02)
    assert s.output_tokens == 10  # completed requests only
    assert s.output_tok_per_s == pytest.approx(10 / 9.02)
    assert s.requests_per_s == pytest.approx(2 / 9.02)
    assert s.ttft_p99_s == pytest.approx(1.99)
    assert s.itl_p50_s == pytest.approx(0.5)
    assert summarize_samples([]).output_tok_per_s is None


def test_ab_report_shows_each_arms_own_values_beside_the_ratio():
    from rich.console import Console

    result = _ab()
    ratios = compare_arms(result, ["burst"])
    md = ab_markdown(result, ratios, WL)
    # Arm A's TTFT p50 is 1.5 s, arm B's 0.75 s (B runs at half the latencies), B/A 0.50.
    assert "| all | A | 1500 |" in md
    assert "| all | B | 750.0 |" in md
    assert "| all | B/A | 0.50 (0.50-0.50) |" in md
    console = Console(width=400, record=True)
    from tierctl.bench.report import ab_table

    console.print(ab_table(result, ratios))
    text = console.export_text()
    assert "A = http://a, B = http://b" in text
    rows = {line.split("│")[2].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "1500" in rows["A"]
    assert "750.0" in rows["B"]
    assert "0.50 (0.50-0.50)" in rows["B/A"]
    tok = {m.metric: m.ratio for m in ratios}["output_tok_per_s"]
    assert tok.a is not None
    assert tok.b is not None
    assert tok.ratio == pytest.approx(tok.b / tok.a)


def test_ab_cdf_plot_has_a_row_per_lane_and_names_the_arms(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from tierctl.bench.plots import plot_ab

    def two_lanes(scale: float, label: str) -> RunRecord:
        reqs = (
            _req(0, ttft=1.0 * scale, e2e=3.0 * scale, lane="burst"),
            _req(1, ttft=0.1 * scale, e2e=0.3 * scale, lane="hammer"),
        )
        return RunRecord("http://x", label, "2026-01-01T00:00:00+00:00", 1.0, reqs, (), 2)

    blocks = (Block(0, 0, "A", two_lanes(1.0, "A")), Block(0, 1, "B", two_lanes(0.5, "B")))
    result = ABResult("http://a:1", "http://b:2", "AB", 1, blocks, False)
    seen: list[tuple[list[str], list[str]]] = []
    save = Figure.savefig

    def record(fig, path, *a, **k):
        titles = [ax.get_title() for ax in fig.axes]
        legends = [
            t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()
        ]
        seen.append((titles, legends))
        return save(fig, path, *a, **k)

    monkeypatch.setattr(Figure, "savefig", record)
    files = plot_ab(result, tmp_path, probe_timeout_s=1.0, names=("r1", "r2"))
    assert [f.name for f in files] == ["latency_cdf.png", "probe_latency.png"]
    titles, legends = seen[0]
    assert titles == [
        "burst: TTFT CDF", "burst: TPOT CDF", "burst: E2E CDF",
        "hammer: TTFT CDF", "hammer: TPOT CDF", "hammer: E2E CDF",
    ]  # fmt: skip
    assert "A = r1 (http://a:1) (n=1)" in legends
    assert "B = r2 (http://b:2) (n=1)" in legends
