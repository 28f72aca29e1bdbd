"""Ratios B/A with bootstrap confidence intervals over paired blocks.

An A/B run is a list of *pairs* of blocks (the k-th A block and the k-th B block of one
repetition ran the same requests back to back). The point estimate is the metric of all B
samples pooled over the metric of all A samples pooled; the interval resamples whole pairs
with replacement — the pair is the unit of replication, so drift between repetitions widens
the interval as it should — and takes the 2.5th and 97.5th percentiles of the resampled ratio.
With few pairs the interval is coarse (two pairs give at most three distinct resamples); the
report states the number of pairs next to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class Ratio:
    """B/A of one metric with its bootstrap interval (``None`` where undefined)."""

    a: float | None
    b: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    pairs: int


def safe_ratio(b: float | None, a: float | None) -> float | None:
    """b / a, or ``None`` when either is missing or a is zero (0/0 included)."""
    if a is None or b is None or a == 0:
        return None
    return b / a


def paired_ratio(
    pairs: Sequence[tuple[T, T]],
    metric: Callable[[Sequence[T]], float | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Ratio:
    """Pooled B/A of ``metric`` over ``pairs`` (a_block, b_block) with a bootstrap interval.

    ``metric`` receives the blocks of one arm (a resample may repeat a block) and returns the
    pooled metric.
    """
    n = len(pairs)
    a_all = [p[0] for p in pairs]
    b_all = [p[1] for p in pairs]
    a = metric(a_all) if n else None
    b = metric(b_all) if n else None
    point = safe_ratio(b, a)
    if n == 0 or point is None:
        return Ratio(a, b, point, None, None, n)
    rng = np.random.default_rng(seed)
    draws: list[float] = []
    cache: dict[tuple[int, ...], float | None] = {}
    for _ in range(resamples):
        idx = tuple(sorted(int(i) for i in rng.integers(0, n, n)))
        if idx not in cache:
            cache[idx] = safe_ratio(
                metric([b_all[i] for i in idx]), metric([a_all[i] for i in idx])
            )
        r = cache[idx]
        if r is not None:
            draws.append(r)
    if not draws:
        return Ratio(a, b, point, None, None, n)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(np.asarray(draws), [tail, 100 - tail])
    return Ratio(a, b, point, float(lo), float(hi), n)
