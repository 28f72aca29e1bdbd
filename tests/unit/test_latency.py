"""The latency definitions shared by the simulator and the load client (tierctl.latency)."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.samples import RequestSample
from tierctl.latency import LatencySummary, percentile, tpot_s


def test_percentile_interpolates_between_order_statistics() -> None:
    xs = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(xs, 50) == pytest.approx(2.5)  # halfway between 2 and 3
    assert percentile(xs, 90) == pytest.approx(3.7)  # rank 2.7: 3 + 0.7 * (4 - 3)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=60), st.integers(1, 99))
def test_percentile_agrees_with_the_standard_library(values: list[float], q: int) -> None:
    # statistics.quantiles(method="inclusive") is the same linear interpolation, computed by
    # other code: an independent oracle for every integer percentile
    expected = statistics.quantiles(values, n=100, method="inclusive")[q - 1]
    assert percentile(values, q) == pytest.approx(expected, rel=1e-9, abs=1e-6)


def test_tpot_excludes_the_first_token() -> None:
    # first token at 1.0 s, last at 2.0 s, 11 tokens: 10 decode intervals of 0.1 s
    assert tpot_s(1.0, 2.0, 11) == pytest.approx(0.1)
    assert tpot_s(1.0, 1.0, 1) is None  # one token: no decode interval
    assert tpot_s(1.0, 1.0, 0) is None


def test_bench_sample_tpot_is_the_shared_definition() -> None:
    sample = RequestSample(
        index=0,
        lane="l",
        scheduled_s=0.0,
        sent_s=0.0,
        queue_s=0.0,
        ttft_s=0.5,
        e2e_s=2.5,
        itl_s=(),
        input_tokens=10,
        output_tokens=5,
        planned_input_tokens=10,
        outcome="completed",
    )
    assert sample.tpot_s == pytest.approx(0.5)  # (2.5 - 0.5) / (5 - 1)


def test_latency_summary_fields() -> None:
    fields = LatencySummary.fields_of(3, [1.0, 2.0, 3.0], [0.1, 0.3])
    summary = LatencySummary(**fields)
    assert summary.completed == 3
    assert summary.ttft_p50_s == pytest.approx(2.0)
    assert summary.ttft_p95_s == pytest.approx(2.9)
    assert summary.tpot_p50_s == pytest.approx(0.2)
    assert summary.tpot_p90_s == pytest.approx(0.28)
    empty = LatencySummary(**LatencySummary.fields_of(0, [], []))
    assert empty.ttft_p50_s is None
    assert empty.tpot_p90_s is None
