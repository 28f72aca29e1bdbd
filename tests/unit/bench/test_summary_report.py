"""Summaries (metric definitions) and the reports built from them."""

from __future__ import annotations

import orjson
import pytest

from tierctl.bench.ab import ABResult, Block, compare
from tierctl.bench.report import ab_json, ab_markdown, run_json, run_markdown
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord
from tierctl.bench.summary import summarize
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
    s = summarize(_record().requests, _record().probes)
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
    assert "| burst | 4 | 2 | 1500 | 1950 | 500.0 |" in md


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
    ratios = {m.metric: m.ratio for m in compare(result, ["burst"])}
    assert ratios["ttft_p50_s"].ratio == pytest.approx(0.5)
    assert ratios["e2e_p50_s"].ratio == pytest.approx(0.5)
    assert ratios["completion_pct"].ratio == pytest.approx(1.0)
    assert ratios["probe_misses"].a == 6
    doc = orjson.loads(orjson.dumps(ab_json(result, compare(result, ["burst"]), WL)))
    assert len(doc["blocks"]) == 4
    assert doc["pairs"] == 2
    assert sum(len(b["requests"]) for b in doc["blocks"]) == 16
    md = ab_markdown(result, compare(result, ["burst"]), WL)
    assert "| all | 0.50 (0.50-0.50) |" in md
    assert "| 0 | 0 | A | 4 | 2 | 1 | 1 | 10.0 | 10.0 | 10.0 | 3 | 1 | - |" in md
