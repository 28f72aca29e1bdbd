"""Laws of the paired comparison and the pooled proportion test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.readout.stats import compare_paired, compare_proportions

positive = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(positive, positive), min_size=6, max_size=60))
def test_swapping_the_arms_inverts_the_ratio(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ab, ba = compare_paired(a, b, n_boot=200), compare_paired(b, a, n_boot=200)
    assert ab.ratio * ba.ratio == pytest.approx(1.0)
    assert ab.ci_low * ba.ci_high == pytest.approx(1.0, rel=1e-6)


def test_constant_ratio_is_recovered_and_better() -> None:
    control = np.linspace(1.0, 3.0, 40)  # a load curve both arms follow
    result = compare_paired(control, 0.8 * control)
    assert result.ratio == pytest.approx(0.8)
    assert result.ci_high == pytest.approx(0.8)
    assert result.verdict == "better"


def test_identical_arms_are_the_same() -> None:
    x = np.random.default_rng(1).lognormal(0, 0.3, 50)
    result = compare_paired(x, x.copy())
    assert result.ratio == 1.0
    assert result.p_value == 1.0
    assert result.verdict == "same"


def test_missing_steps_are_dropped_and_counted_never_imputed() -> None:
    control = np.ones(20)
    canary = np.full(20, 2.0)
    canary[::2] = np.nan
    result = compare_paired(control, canary)
    assert (result.n_steps, result.n_used) == (20, 10)
    assert result.ratio == pytest.approx(2.0)
    assert result.verdict == "worse"


def test_too_few_steps_is_no_data() -> None:
    result = compare_paired(np.ones(5), np.ones(5))
    assert result.verdict == "no-data"
    assert math.isnan(result.ratio)


def test_higher_is_better_flips_direction() -> None:
    result = compare_paired(np.full(10, 100.0), np.full(10, 120.0), lower_is_better=False)
    assert result.verdict == "better"


def test_same_seed_same_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.5, 30), rng.lognormal(0, 0.5, 30)
    assert compare_paired(a, b, seed=5) == compare_paired(a, b, seed=5)


def test_zero_aborts_on_both_sides_is_same_not_a_crash() -> None:
    result = compare_proportions(0, 1000, 0, 1000)
    assert result.verdict == "same"
    assert result.ci_low < 1 < result.ci_high


def test_more_aborts_on_the_canary_is_worse_and_fewer_better() -> None:
    assert compare_proportions(2, 2000, 40, 2000).verdict == "worse"
    assert compare_proportions(40, 2000, 2, 2000).verdict == "better"


def test_small_totals_are_no_data() -> None:
    assert compare_proportions(0, 5, 1, 5).verdict == "no-data"


def test_the_ratio_is_canary_over_control_whatever_the_direction() -> None:
    # Regression: for a higher-is-better metric the ratio printed under "canary/control" was
    # control/canary (0.83 for a canary 20% faster).
    control, canary = np.full(10, 100.0), np.full(10, 120.0)
    up = compare_paired(control, canary, lower_is_better=False)
    assert up.ratio == pytest.approx(1.2)
    assert up.ci_low <= 1.2 <= up.ci_high
    assert (up.verdict, up.lower_is_better) == ("better", False)
    down = compare_paired(control, canary, lower_is_better=True)
    assert down.ratio == pytest.approx(1.2)
    assert down.verdict == "worse"
