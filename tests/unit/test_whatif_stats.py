"""The held-out what-if check's statistics (tierctl.whatif): each law can fail for a defect."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.results import MeasuredRequest
from tierctl.whatif import (
    REFERENCES,
    Check,
    FigureScore,
    Measured,
    Prediction,
    aa_floor,
    interval_score,
    judge,
    mean_score,
    measured,
    null_prediction,
    paired_ratios,
    pooled,
    run_figures,
    score_figure,
    skill,
    tally,
    total_skill,
)

ratios = st.floats(min_value=0.05, max_value=20.0, allow_nan=False)


def _req(ttft: float, tpot: float | None) -> MeasuredRequest:
    return MeasuredRequest(0.0, 100, 10, ttft, tpot, ())


def test_run_figures_are_the_simulators_percentiles() -> None:
    reqs = [_req(float(i), float(10 * i)) for i in range(1, 11)] + [_req(11.0, None)]
    got = run_figures(reqs)
    # numpy's linear percentile over TTFT 1..11 and TPOT 10..100 (the request with no TPOT
    # still has a TTFT).
    assert got["TTFT p50"] == pytest.approx(6.0)
    assert got["TTFT p95"] == pytest.approx(10.5)
    assert got["TPOT p50"] == pytest.approx(55.0)
    assert got["TPOT p90"] == pytest.approx(91.0)


def test_paired_ratios_pair_rounds_and_never_pool() -> None:
    control = [{"TTFT p50": 1.0}, {"TTFT p50": 2.0}]
    candidate = [{"TTFT p50": 1.5}, {"TTFT p50": 3.0}]
    # Per round: 1.5 and 1.5. Pooling (medians 1.5 / 2.25 ... ) or crossing rounds
    # (3.0 / 1.0) would give other numbers.
    assert paired_ratios(control, candidate) == {"TTFT p50": [1.5, 1.5]}


def test_paired_ratios_refuse_unpaired_rounds_and_skip_missing_figures() -> None:
    with pytest.raises(ValueError, match="same rounds"):
        paired_ratios([{"x": 1.0}], [])
    assert paired_ratios([{"x": None}, {"x": 2.0}], [{"x": 1.0}, {"x": 1.0}]) == {"x": [0.5]}


@given(st.lists(ratios, min_size=1, max_size=9))
def test_measured_is_the_median_and_range_of_the_rounds(values: list[float]) -> None:
    m = measured(values)
    assert m is not None
    below = sum(v < m.ratio for v in values)
    above = sum(v > m.ratio for v in values)
    assert below <= len(values) / 2
    assert above <= len(values) / 2
    assert (m.low, m.high, m.rounds) == (min(values), max(values), len(values))


@given(st.lists(ratios, min_size=1, max_size=9))
def test_aa_floor_covers_every_aa_ratio_both_ways(values: list[float]) -> None:
    floor = aa_floor(values)
    assert floor is not None
    assert floor >= 0
    for v in values:
        assert 1 / (1 + floor) * (1 - 1e-9) <= v <= (1 + floor) * (1 + 1e-9)
    # and it is tight: the worst ratio sits on the floor's edge
    worst = max(values, key=lambda v: abs(math.log(v)))
    assert max(worst, 1 / worst) == pytest.approx(1 + floor)


def test_aa_floor_is_symmetric_in_log() -> None:
    # 0.8 is as far from 1 as 1.25: a floor read linearly (|r - 1|) would give 0.2.
    assert aa_floor([0.8]) == pytest.approx(0.25)
    assert aa_floor([1.25]) == pytest.approx(0.25)
    assert aa_floor([]) is None


def _m(r: float) -> Measured:
    return Measured(r, r, r, 3)


def test_judge_effect_direction_and_inside() -> None:
    c = judge("TTFT p50", _m(0.6), Prediction(0.7, 0.55, 0.9), floor=0.2)
    assert (c.effect, c.direction_right, c.inside) == (True, True, True)
    # wrong way
    c = judge("TTFT p50", _m(0.6), Prediction(1.3, 1.1, 1.5), floor=0.2)
    assert (c.effect, c.direction_right, c.inside) == (True, False, False)
    # a predicted 1.00 against a real effect is wrong, even when the interval is wide
    c = judge("TTFT p50", _m(0.6), Prediction(1.0, 0.5, 1.5), floor=0.2)
    assert (c.effect, c.direction_right, c.inside) == (True, False, True)
    # within the floor: no effect, direction not judged
    c = judge("TTFT p50", _m(1.1), Prediction(0.8, 0.7, 0.9), floor=0.2)
    assert (c.effect, c.direction_right, c.inside) == (False, True, False)


def test_judge_floor_edges_are_log_symmetric() -> None:
    # 1/1.25 = 0.8 is on the floor: not an effect; 0.79 is.
    assert not judge("x", _m(0.8), Prediction(1, 1, 1), 0.25).effect
    assert judge("x", _m(0.79), Prediction(1, 1, 1), 0.25).effect
    assert not judge("x", _m(1.25), Prediction(1, 1, 1), 0.25).effect
    assert judge("x", _m(1.26), Prediction(1, 1, 1), 0.25).effect


@given(ratios, ratios, ratios)
def test_inside_is_exactly_the_closed_interval(r: float, a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    c = judge("x", _m(r), Prediction((lo + hi) / 2, lo, hi), 0.1)
    assert c.inside == (lo <= r <= hi)


def _check(effect: bool, right: bool, inside: bool) -> Check:
    return Check("x", _m(1.0), Prediction(1, 1, 1), 0.1, effect, right, inside)


def test_tally_counts_direction_only_on_effects_and_the_80_percent_bar() -> None:
    checks = [_check(True, True, True)] * 4 + [_check(False, True, False)]
    t = tally(checks)
    assert (t.effects, t.direction_right, t.figures, t.inside) == (4, 4, 5, 4)
    assert t.direction_ok
    assert t.coverage_ok
    assert t.inside_fraction == pytest.approx(0.8)
    # one inside fewer: 3 of 5 = 60 %, the bar is missed
    assert not tally([_check(True, True, False), *checks[1:]]).coverage_ok
    # one wrong direction on an effect misses the direction bar
    assert not tally([_check(True, False, True), *checks[1:]]).direction_ok
    # a wrong direction where there was no effect is not counted against it
    assert tally([_check(False, False, True), *checks[1:]]).direction_ok
    assert not tally([]).coverage_ok


# -- the interval score and skill (issue #40) ---------------------------------------------


def test_the_interval_score_is_the_width_inside_and_charges_misses_20_times() -> None:
    p = Prediction(1.0, 0.8, 1.25)
    width = math.log(1.25) - math.log(0.8)
    assert interval_score(p, 1.0) == pytest.approx(width)
    assert interval_score(p, 0.8) == pytest.approx(width)
    assert interval_score(p, 2.0) == pytest.approx(width + 20 * (math.log(2.0) - math.log(1.25)))
    assert interval_score(p, 0.5) == pytest.approx(width + 20 * (math.log(0.8) - math.log(0.5)))
    with pytest.raises(ValueError, match="low <= high"):
        interval_score(Prediction(1.0, 1.2, 0.9), 1.0)
    with pytest.raises(ValueError, match="ratio > 0"):
        interval_score(p, 0.0)


@given(ratios, ratios, ratios)
def test_a_wider_interval_around_the_same_centre_never_misses_more(
    lo: float, hi: float, y: float
) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    narrow = Prediction(1.0, lo, hi)
    wide = Prediction(1.0, lo / 2, hi * 2)
    inside = lo <= y <= hi
    if inside:  # covered by both: the wide one pays its width
        assert interval_score(wide, y) > interval_score(narrow, y)
    # Widening by a factor 2 each way costs at most 2 ln 2 more, whatever y is.
    assert interval_score(wide, y) <= interval_score(narrow, y) + 2 * math.log(2) + 1e-9


def test_the_score_is_proper_the_true_quantiles_beat_a_wider_or_narrower_band() -> None:
    import random

    rng = random.Random(4)
    ys = [math.exp(rng.gauss(0.0, 0.2)) for _ in range(20000)]
    q = 1.6449 * 0.2  # the 5 % and 95 % points of the log-normal
    true = Prediction(1.0, math.exp(-q), math.exp(q))
    for factor in (0.5, 0.8, 1.25, 2.0):
        other = Prediction(1.0, math.exp(-q * factor), math.exp(q * factor))
        assert mean_score([true] * len(ys), ys) < mean_score([other] * len(ys), ys)


def test_null_prediction_and_skill() -> None:
    band = null_prediction(0.25)
    assert (band.ratio, band.low, band.high) == (1.0, pytest.approx(0.8), 1.25)
    assert skill(1.0, 2.0) == pytest.approx(0.5)
    assert skill(3.0, 2.0) == pytest.approx(-0.5)
    assert skill(0.0, 0.0) == 0.0
    assert skill(1.0, 0.0) == -math.inf
    with pytest.raises(ValueError, match="paired"):
        mean_score([band], [1.0, 1.1])


def test_score_figure_scores_the_null_band_from_the_measured_floor_and_the_no_change_answer() -> (
    None
):
    pred = Prediction(1.5, 1.3, 1.8)
    no_change = Prediction(1.0, 0.9, 1.1)
    sc = score_figure(pred, 1.6, 0.25, no_change)
    assert sc.model == pytest.approx(interval_score(pred, 1.6))
    # The null band is [1/1.25, 1.25]: 1.6 lies above it, so it pays the miss 20 times.
    assert sc.references["null"] == pytest.approx(math.log(1.25 / 0.8) + 20 * math.log(1.6 / 1.25))
    assert sc.references["no change"] == pytest.approx(interval_score(no_change, 1.6))
    assert sc.skill("null") == pytest.approx(1 - sc.model / sc.references["null"])
    assert sc.skill("null") > 0  # a right, narrow interval beats the band it falls outside
    without = score_figure(pred, 1.6, 0.25, None)
    assert "no change" not in without.references
    assert without.skill("no change") is None


def test_total_skill_is_the_skill_of_the_mean_scores_not_the_mean_of_skills() -> None:
    # Figure 1: model 0.1 against 1.0 (skill 0.9); figure 2: model 3.0 against 5.0 (0.4).
    scored = [FigureScore(0.1, {"null": 1.0}), FigureScore(3.0, {"null": 5.0})]
    tot = total_skill(scored)
    assert tot is not None
    assert tot.figures == 2
    assert tot.model == pytest.approx(1.55)
    assert tot.references["null"] == pytest.approx(3.0)
    assert tot.skills["null"] == pytest.approx(1 - 1.55 / 3.0)  # 0.483
    assert tot.skills["null"] != pytest.approx((0.9 + 0.4) / 2)  # the mean of skills, 0.65
    assert "no change" not in tot.skills
    assert total_skill([]) is None


def test_total_skill_scores_a_reference_only_over_the_figures_it_answered() -> None:
    scored = [FigureScore(1.0, {"null": 2.0, "no change": 4.0}), FigureScore(9.0, {"null": 3.0})]
    tot = total_skill(scored)
    assert tot is not None
    assert tot.skills["null"] == pytest.approx(1 - 5.0 / 2.5)
    assert tot.skills["no change"] == pytest.approx(1 - 1.0 / 4.0)  # figure 2 not counted
    assert set(REFERENCES) == {"null", "no change"}


@given(st.lists(st.tuples(ratios, st.floats(0.01, 3.0)), min_size=1, max_size=12))
def test_the_null_predictor_has_zero_skill_against_itself(cells: list[tuple[float, float]]) -> None:
    scored = [score_figure(null_prediction(f), y, f, null_prediction(f)) for y, f in cells]
    tot = total_skill(scored)
    assert tot is not None
    assert tot.skills["null"] == pytest.approx(0.0, abs=1e-9)
    assert tot.skills["no change"] == pytest.approx(0.0, abs=1e-9)


def test_pooled_is_the_geometric_mean_per_round_and_figure() -> None:
    a = [{"TTFT p50": 1.0, "TPOT p50": 4.0}, {"TTFT p50": 2.0, "TPOT p50": None}]
    b = [{"TTFT p50": 4.0, "TPOT p50": 1.0}, {"TTFT p50": 8.0, "TPOT p50": 3.0}]
    got = pooled(a, b)
    assert got == [{"TTFT p50": 2.0, "TPOT p50": 2.0}, {"TTFT p50": 4.0, "TPOT p50": None}]
    with pytest.raises(ValueError, match="same rounds"):
        pooled(a, b[:1])


@given(st.lists(st.tuples(ratios, ratios), min_size=1, max_size=8))
def test_a_candidate_against_the_pool_is_the_geometric_mean_of_its_two_ratios(
    pairs: list[tuple[float, float]],
) -> None:
    f0 = [{"m": x} for x, _ in pairs]
    aa = [{"m": y} for _, y in pairs]
    cand = [{"m": 1.0} for _ in pairs]
    vs_pool = paired_ratios(pooled(f0, aa), cand)["m"]
    vs_f0, vs_aa = paired_ratios(f0, cand)["m"], paired_ratios(aa, cand)["m"]
    for p, r1, r2 in zip(vs_pool, vs_f0, vs_aa, strict=True):
        assert p == pytest.approx(math.sqrt(r1 * r2))
