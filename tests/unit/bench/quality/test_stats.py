"""The quality lane's statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.quality.stats import cluster_bootstrap_rate, floor_test, mcnemar, wilson


def test_wilson_matches_the_textbook_values() -> None:
    # 8/10 at 95%: the Wilson interval is (0.4902, 0.9433)
    iv = wilson(8, 10)
    assert iv.low == pytest.approx(0.4902, abs=1e-4)
    assert iv.high == pytest.approx(0.9433, abs=1e-4)
    zero = wilson(0, 20)
    assert zero.low == pytest.approx(0.0, abs=1e-12)
    assert zero.high == pytest.approx(0.1611, abs=1e-4)
    assert wilson(0, 0).rate is None


@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_contains_the_point_estimate(k: int, n: int) -> None:
    k = min(k, n)
    iv = wilson(k, n)
    assert 0.0 <= iv.low <= k / n + 1e-12
    assert k / n - 1e-12 <= iv.high <= 1.0


def test_mcnemar_exact_p_values() -> None:
    # 6 discordant, all one way: two-sided exact p = 2 * 0.5**6 = 0.03125
    a = [True] * 6 + [True] * 10 + [False] * 4
    b = [False] * 6 + [True] * 10 + [False] * 4
    m = mcnemar(a, b)
    assert (m.a_only, m.b_only) == (6, 0)
    assert m.p_value == pytest.approx(0.03125)
    # balanced discordance: p = 1
    assert mcnemar([True, False], [False, True]).p_value == pytest.approx(1.0)
    # nothing discordant
    assert mcnemar([True, False], [True, False]).p_value == 1.0
    with pytest.raises(ValueError, match="same length"):
        mcnemar([True], [])


def test_floor_test_counts_and_one_sided_p() -> None:
    ab = [True] * 5 + [False] * 15
    fl = [False] * 20
    t = floor_test(ab, fl)
    assert (t.differ, t.floor, t.only_ab, t.only_floor) == (5, 0, 5, 0)
    assert t.p_value == pytest.approx(0.5**5)
    assert t.above
    assert t.verdict == "above the floor: 5 items differ"
    # four items all one way is not enough at 5% (p = 1/16)
    t4 = floor_test([True] * 4 + [False] * 6, [False] * 10)
    assert t4.p_value == pytest.approx(1 / 16)
    assert t4.verdict == "at the noise floor"


def test_floor_test_nondeterminism_explains_the_differences() -> None:
    # A-B differs on the same items A-A' differs on: nothing beyond the floor
    same = [True, False, True, False, True, True, False, False]
    t = floor_test(same, same)
    assert (t.only_ab, t.only_floor, t.p_value) == (0, 0, 1.0)
    assert t.verdict == "at the noise floor"
    # the floor is higher than A-B: certainly not above
    t2 = floor_test([False] * 8, [True] * 8)
    assert t2.p_value == pytest.approx(1.0)


def test_cluster_bootstrap_interval_brackets_the_pooled_rate() -> None:
    agree = [95, 100, 90, 99, 100, 97]
    total = [100] * 6
    rate, lo, hi = cluster_bootstrap_rate(agree, total, seed=1)
    assert rate == pytest.approx(sum(agree) / 600)
    assert lo <= rate <= hi
    assert lo >= 0.9
    assert hi <= 1.0
    assert cluster_bootstrap_rate([10, 10], [10, 10]) == (1.0, 1.0, 1.0)
    assert math.isnan(cluster_bootstrap_rate([], [])[0])
