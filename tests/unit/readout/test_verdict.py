"""The readout's overall verdict from per-metric results: pure, no Prometheus needed."""

from __future__ import annotations

import pytest

from tierctl.readout.analysis import MetricReadout, judge_canary
from tierctl.readout.stats import PairedResult, ProportionResult, Verdict


def _row(title: str, verdict: Verdict, *, guard: bool = True, ratio: float = 1.0) -> MetricReadout:
    result = PairedResult(
        n_steps=20,
        n_used=20,
        ratio=ratio,
        ci_low=ratio * 0.9,
        ci_high=ratio * 1.1,
        median_ratio=ratio,
        p_value=0.01,
        verdict=verdict,
    )
    return MetricReadout(title.lower(), title, guard, 1.0, ratio, result)


def _aborts(verdict: Verdict = "same", rate_ratio: float = 1.0) -> ProportionResult:
    return ProportionResult(10, 1000, 10 * rate_ratio, 1000, rate_ratio, 0.5, 2.0, 0.2, verdict)


def test_all_same_passes() -> None:
    assert judge_canary([_row("TTFT p95", "same"), _row("TPOT p50", "same")], _aborts()) == (
        "pass",
        ["no guard worse"],
    )


def test_better_is_named_in_the_pass_reason() -> None:
    verdict, reasons = judge_canary(
        [_row("TTFT p95", "better"), _row("TPOT p50", "same")], _aborts()
    )
    assert verdict == "pass"
    assert reasons == ["better on TTFT p95; no guard worse"]


def test_a_worse_guard_fails_with_its_ratio_and_interval() -> None:
    verdict, reasons = judge_canary([_row("TPOT p50", "worse", ratio=1.3)], _aborts())
    assert verdict == "fail"
    assert reasons == ["TPOT p50 is worse: 1.30x [1.17, 1.43]"]


def test_a_worse_metric_that_is_not_a_guard_does_not_fail() -> None:
    verdict, _ = judge_canary(
        [_row("throughput", "worse", guard=False), _row("TTFT", "same")], _aborts()
    )
    assert verdict == "pass"


def test_worse_aborts_fail_even_when_every_metric_is_same() -> None:
    verdict, reasons = judge_canary([_row("TTFT p95", "same")], _aborts("worse", 3.0))
    assert verdict == "fail"
    assert reasons == ["abort rate is worse: 3.00x (p=0.2)"]


def test_fail_wins_over_missing_data() -> None:
    rows = [_row("TTFT p95", "no-data"), _row("TPOT p50", "worse", ratio=2.0)]
    verdict, reasons = judge_canary(rows, _aborts())
    assert verdict == "fail"
    assert len(reasons) == 1


@pytest.mark.parametrize("guard", [True, False])
def test_missing_data_is_inconclusive_for_any_metric(guard: bool) -> None:
    verdict, reasons = judge_canary(
        [_row("ITL", "no-data", guard=guard), _row("TTFT", "same")], _aborts()
    )
    assert verdict == "inconclusive"
    assert reasons == ["not enough paired steps for ITL"]


def test_an_undecided_guard_is_inconclusive_an_undecided_other_is_not() -> None:
    verdict, reasons = judge_canary([_row("TPOT p50", "inconclusive")], _aborts())
    assert (verdict, reasons) == ("inconclusive", ["guard metrics undecided: TPOT p50"])
    assert judge_canary([_row("tok/s", "inconclusive", guard=False)], _aborts())[0] == "pass"


def test_a_guard_shown_not_worse_passes_even_where_it_may_be_much_better() -> None:
    # docs/readout.md: a guard is undecided when its interval is wider than the tolerance in
    # the *bad* direction. E2E p50 0.80 [0.71, 0.90] at 15%: maybe much better, never worse.
    better_maybe = MetricReadout(
        "e2e_p50",
        "E2E p50",
        True,
        15.0,
        12.0,
        PairedResult(9, 9, 0.80, 0.71, 0.90, 0.8, 0.03, "inconclusive"),
    )
    assert judge_canary([better_maybe], _aborts(), tolerance=0.15) == (
        "pass",
        ["no guard worse", "shown not worse than +15%: E2E p50 (at most 0.90x)"],
    )
    # Reaching past +15% on the bad side stays undecided, with or without the tolerance.
    worse_maybe = MetricReadout(
        "ttft_p50",
        "TTFT p50",
        True,
        10.0,
        10.0,
        PairedResult(9, 9, 1.04, 0.90, 1.25, 1.0, 0.6, "inconclusive"),
    )
    for tolerance in (0.15, None):
        assert judge_canary([better_maybe, worse_maybe], _aborts(), tolerance=tolerance) == (
            "inconclusive",
            ["guard metrics undecided: TTFT p50"]
            if tolerance
            else ["guard metrics undecided: E2E p50, TTFT p50"],
        )
