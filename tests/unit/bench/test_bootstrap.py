"""Paired-block ratios and their bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.bench.bootstrap import paired_ratio, safe_ratio


def _median(blocks):
    return float(np.median(np.concatenate(blocks)))


def test_identical_arms_give_one_with_a_degenerate_interval():
    rng = np.random.default_rng(0)
    blocks = [rng.exponential(1.0, 50) for _ in range(4)]
    r = paired_ratio([(b, b.copy()) for b in blocks], _median)
    assert r.ratio == pytest.approx(1.0)
    assert r.ci_low == pytest.approx(1.0)
    assert r.ci_high == pytest.approx(1.0)
    assert r.pairs == 4


def test_b_scaled_gives_the_scale():
    rng = np.random.default_rng(1)
    pairs = [(b, 0.6 * b) for b in (rng.exponential(1.0, 40) for _ in range(6))]
    r = paired_ratio(pairs, _median)
    assert r.ratio == pytest.approx(0.6)
    assert r.ci_low == pytest.approx(0.6)
    assert r.ci_high == pytest.approx(0.6)


def test_interval_widens_when_pairs_disagree():
    rng = np.random.default_rng(2)
    a = [rng.exponential(1.0, 40) for _ in range(6)]
    factors = [0.5, 0.9, 0.6, 1.0, 0.55, 0.95]
    r = paired_ratio([(x, f * x) for x, f in zip(a, factors, strict=True)], _median)
    assert r.ci_low is not None
    assert r.ci_high is not None
    assert r.ci_low < r.ratio < r.ci_high
    assert r.ci_low >= 0.5
    assert r.ci_high <= 1.0


def test_undefined_ratios():
    assert safe_ratio(1.0, 0.0) is None
    assert safe_ratio(None, 1.0) is None
    r = paired_ratio([(0, 0), (0, 0)], lambda blocks: float(sum(blocks)))
    assert r.ratio is None
    assert r.ci_low is None
    assert paired_ratio([], _median).pairs == 0


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(min_value=0.1, max_value=10), st.floats(min_value=0.1, max_value=10)),
        min_size=1,
        max_size=6,
    )
)
def test_point_and_interval_lie_within_the_per_pair_ratios(pairs):
    # With one value per block, the pooled ratio of means (the point) and that of every
    # resample are weighted means of the per-pair ratios b/a (weights a), so all of them lie
    # between the smallest and the largest per-pair ratio.
    r = paired_ratio(pairs, lambda blocks: float(sum(blocks)) / len(blocks), resamples=200)
    assert r.ratio is not None
    assert r.ci_low is not None
    assert r.ci_high is not None
    lo = min(b / a for a, b in pairs)
    hi = max(b / a for a, b in pairs)
    assert lo - 1e-9 <= r.ratio <= hi + 1e-9
    assert r.ratio == pytest.approx(sum(b for _, b in pairs) / sum(a for a, _ in pairs))
    assert lo - 1e-9 <= r.ci_low <= r.ci_high <= hi + 1e-9
