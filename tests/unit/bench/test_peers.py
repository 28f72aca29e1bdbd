"""TPOT/ITL under each peer tool's definition, on samples whose every time is known."""

from __future__ import annotations

import pytest

from tierctl.bench.peers import DEFINITIONS, peer_metrics
from tierctl.bench.report import run_markdown
from tierctl.bench.samples import RequestSample, RunRecord
from tierctl.bench.workload import workload_from_dict


def _sample(ttft: float, gaps: tuple[float, ...], tail: float, out: int, i: int = 0):
    return RequestSample(
        index=i,
        lane="burst",
        scheduled_s=0.0,
        sent_s=0.0,
        queue_s=0.0,
        ttft_s=ttft,
        e2e_s=ttft + sum(gaps) + tail,
        itl_s=gaps,
        input_tokens=100,
        output_tokens=out,
        planned_input_tokens=100,
        outcome="completed",
    )


# A long prefill (1 s) then 4 gaps of 100 ms; the stream ends 50 ms after the last token.
LONG = _sample(1.0, (0.1, 0.1, 0.1, 0.1), 0.05, 5)


def _by(requests):
    return {(m.tool, m.metric): m for m in peer_metrics(requests)}


def test_each_definition_on_one_request():
    m = _by([LONG])
    assert m[("tierctl", "TPOT")].p50_s == pytest.approx(0.45 / 4)
    assert m[("vllm bench serve", "TPOT")].p50_s == pytest.approx(0.45 / 4)
    assert m[("sglang.bench_serving", "TPOT")].p50_s == pytest.approx(0.45 / 4)
    # guidellm's TPOT includes the 1 s TTFT: 1.4 s over 5 tokens.
    assert m[("guidellm", "time_per_output_token_ms")].p50_s == pytest.approx(1.4 / 5)
    # guidellm's ITL is the others' TPOT without the stream's tail.
    assert m[("guidellm", "inter_token_latency_ms")].p50_s == pytest.approx(0.1)
    assert m[("AIPerf", "inter_token_latency")].p50_s == pytest.approx(0.45 / 4)
    assert m[("AIPerf", "inter_chunk_latency")].p50_s == pytest.approx(0.1)
    assert m[("tierctl", "ITL")].p50_s == pytest.approx(0.1)


def test_pooled_gaps_weigh_long_streams_more_than_per_request_values():
    # One stream of 9 gaps of 10 ms, one of a single 500 ms gap.
    fast = _sample(0.1, (0.01,) * 9, 0.0, 10, i=1)
    slow = _sample(0.1, (0.5,), 0.0, 2, i=2)
    m = _by([fast, slow])
    assert m[("vllm bench serve", "ITL")].n == 10
    assert m[("vllm bench serve", "ITL")].p50_s == pytest.approx(0.01)
    assert m[("AIPerf", "inter_chunk_latency")].n == 2
    assert m[("AIPerf", "inter_chunk_latency")].p50_s == pytest.approx((0.01 + 0.5) / 2)


def test_failed_requests_and_single_token_streams_are_left_out():
    failed = RequestSample(
        3, "burst", 0.0, 0.0, 0.0, 0.2, 0.3, (0.1,), 1, 2, 1, "failed", "connection"
    )
    one = _sample(0.2, (), 0.01, 1, i=4)
    m = _by([LONG, failed, one])
    assert m[("tierctl", "TPOT")].n == 1
    assert m[("guidellm", "time_per_output_token_ms")].n == 2  # defined for one token


def test_every_tool_has_a_tpot_and_an_itl_and_the_report_lists_them():
    tools = {t for t, *_ in DEFINITIONS}
    assert tools == {"tierctl", "vllm bench serve", "sglang.bench_serving", "guidellm", "AIPerf"}
    for tool in tools:
        assert {d[2] for d in DEFINITIONS if d[0] == tool} >= {"itl"}
    wl = workload_from_dict(
        {"lanes": [{"kind": "burst", "count": 1, "input_tokens": 5, "output_tokens": 5}]}
    )
    rec = RunRecord("http://x", "run", "2026-01-01T00:00:00+00:00", 2.0, (LONG,), (), 1)
    md = run_markdown(rec, wl)
    assert "## TPOT and ITL by each tool's definition" in md
    assert (
        "| guidellm | time_per_output_token_ms | (last token - start) / out  (includes TTFT) | request | 280.0 | 280.0 |"
        in md
    )
