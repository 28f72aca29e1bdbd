"""The statistics of the quality lane: intervals, McNemar's test, and the noise-floor test.

Every test is exact (binomial) rather than asymptotic, because the counts that matter — items
on which two arms disagree — are small. See docs/quality.md for the definitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """A proportion with its two-sided confidence interval."""

    k: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float | None:
        """k / n, or None when n is 0."""
        return self.k / self.n if self.n else None


def wilson(k: int, n: int, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of ``k`` successes in ``n`` trials (good at 0 and n)."""
    if n == 0:
        return Interval(0, 0, 0.0, 1.0)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(k, n, max(0.0, float(centre - half)), min(1.0, float(centre + half)))


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired per-item correctness of A and B.

    Attributes:
        a_only: Items A got right and B got wrong.
        b_only: Items B got right and A got wrong.
        p_value: Two-sided exact binomial p-value on the discordant items (1.0 when none).
    """

    a_only: int
    b_only: int
    p_value: float


def mcnemar(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> McNemar:
    """McNemar's exact test: under H0 each discordant item is A-only or B-only with p = 1/2."""
    if len(a_correct) != len(b_correct):
        raise ValueError("paired sequences must have the same length")
    a_only = sum(1 for a, b in zip(a_correct, b_correct, strict=True) if a and not b)
    b_only = sum(1 for a, b in zip(a_correct, b_correct, strict=True) if b and not a)
    n = a_only + b_only
    p = 1.0 if n == 0 else float(stats.binomtest(a_only, n, 0.5).pvalue)
    return McNemar(a_only, b_only, min(1.0, p))


@dataclass(frozen=True)
class FloorTest:
    """Does A vs B disagree on more items than A vs A' (nondeterminism alone)?

    Attributes:
        items: Items compared.
        differ: Items on which A and B differ.
        floor: Items on which A and A' differ (the noise floor).
        only_ab: Items differing in A-B but not in A-A'.
        only_floor: Items differing in A-A' but not in A-B.
        p_value: One-sided exact sign test that ``only_ab`` exceeds ``only_floor`` (1.0 if
            neither happens).
        alpha: Level the verdict uses.
    """

    items: int
    differ: int
    floor: int
    only_ab: int
    only_floor: int
    p_value: float
    alpha: float

    @property
    def above(self) -> bool:
        """Whether A vs B is above the noise floor at level ``alpha``."""
        return self.p_value < self.alpha

    @property
    def verdict(self) -> str:
        """``at the noise floor`` or ``above the floor: N items differ``."""
        if self.above:
            return f"above the floor: {self.differ} items differ"
        return "at the noise floor"


def floor_test(
    ab_differ: Sequence[bool], floor_differ: Sequence[bool], alpha: float = 0.05
) -> FloorTest:
    """Paired test of A-B disagreement against A-A' disagreement, item by item.

    Under H0 (B differs from A no more than A differs from itself) an item that differs in one
    comparison but not the other is equally likely to be either kind, so the count of
    A-B-only items among the discordant ones is Binomial(n, 1/2); the test is one-sided.
    """
    if len(ab_differ) != len(floor_differ):
        raise ValueError("paired sequences must have the same length")
    only_ab = sum(1 for d, f in zip(ab_differ, floor_differ, strict=True) if d and not f)
    only_floor = sum(1 for d, f in zip(ab_differ, floor_differ, strict=True) if f and not d)
    n = only_ab + only_floor
    p = 1.0 if n == 0 else float(stats.binom.sf(only_ab - 1, n, 0.5))
    return FloorTest(
        items=len(ab_differ),
        differ=sum(ab_differ),
        floor=sum(floor_differ),
        only_ab=only_ab,
        only_floor=only_floor,
        p_value=min(1.0, p),
        alpha=alpha,
    )


def cluster_bootstrap_rate(
    agree: Sequence[int],
    total: Sequence[int],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(rate, low, high) of a pooled rate sum(agree)/sum(total), resampling whole items.

    Tokens within one text are not independent (one flip shifts the rest), so the interval
    resamples items, not tokens (a cluster bootstrap, percentile interval).
    """
    a = np.asarray(agree, dtype=float)
    t = np.asarray(total, dtype=float)
    if t.sum() == 0:
        return (float("nan"), 0.0, 1.0)
    rate = float(a.sum() / t.sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(resamples, len(a)))
    sums_t = t[idx].sum(axis=1)
    rates = np.where(sums_t > 0, a[idx].sum(axis=1) / np.maximum(sums_t, 1), rate)
    lo, hi = np.quantile(rates, [(1 - confidence) / 2, (1 + confidence) / 2])
    return rate, float(lo), float(hi)
