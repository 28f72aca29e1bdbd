"""Paired canary-vs-control statistics over aligned time steps.

Control and canary sit behind the same proxy and see the same traffic mix at the same time,
so each time step is a natural pair: comparing step by step removes the daily load curve that
an unpaired test (Kayenta's Mann-Whitney over pooled samples) has to fight. The effect is the
geometric mean of the per-step ratios canary/control; its confidence interval comes from a
circular block bootstrap (steps are autocorrelated, so single steps are not resampled alone);
the Wilcoxon signed-rank test on the log ratios gives a p-value. Steps where either side has
no data or too few requests are dropped and counted, never imputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from tierctl.quantity import Direction, judge_ratio

Verdict = Literal["better", "same", "worse", "inconclusive", "no-data"]


@dataclass(frozen=True)
class PairedResult:
    """The canary/control comparison of one metric."""

    n_steps: int
    n_used: int
    ratio: float  # geometric mean of canary/control per step, whatever the direction
    ci_low: float
    ci_high: float
    median_ratio: float
    p_value: float
    verdict: Verdict  # from the ratio and the metric's direction: "better" is the canary
    lower_is_better: bool = True


@dataclass(frozen=True)
class ProportionResult:
    """Canary vs control on a pooled count (e.g. aborted / all requests)."""

    control_events: float
    control_total: float
    canary_events: float
    canary_total: float
    rate_ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict


def _block_bootstrap_means(
    x: NDArray[np.float64], n_boot: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Circular block bootstrap of the mean of ``x`` (block length ~ n^(1/3))."""
    n = len(x)
    block = max(1, round(n ** (1 / 3)))
    n_blocks = math.ceil(n / block)
    starts = rng.integers(0, n, size=(n_boot, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]) % n
    samples = x[idx.reshape(n_boot, -1)[:, :n]]
    means: NDArray[np.float64] = samples.mean(axis=1)
    return means


def classify_interval(
    low: float, high: float, tolerance: float, *, lower_is_better: bool = True
) -> Verdict:
    """Equivalence-style verdict of a canary/control ratio's interval: a change counts only
    when it is confidently larger than the tolerance, in either direction; a tiny but
    significant shift is "same". Below the band is better for a lower-is-better metric
    (latency), worse for a higher-is-better one (throughput). Public so that other
    comparisons (the demo's A/B) are judged by exactly the readout's rule."""
    direction = Direction.LOWER_IS_BETTER if lower_is_better else Direction.HIGHER_IS_BETTER
    change = judge_ratio(low, high, direction, tolerance)
    return "inconclusive" if change == "unclear" else change


def not_worse_than(result: PairedResult, tolerance: float) -> bool:
    """Whether the whole interval stays on the good side of ``1 ± tolerance``: at most
    ``1 + tolerance`` for a lower-is-better metric, at least ``1 / (1 + tolerance)`` for a
    higher-is-better one."""
    if result.lower_is_better:
        return result.ci_high <= 1.0 + tolerance
    return result.ci_low >= 1.0 / (1.0 + tolerance)


def compare_paired(
    control: NDArray[np.float64],
    canary: NDArray[np.float64],
    *,
    usable: NDArray[np.bool_] | None = None,
    lower_is_better: bool = True,
    tolerance: float = 0.05,
    confidence: float = 0.95,
    n_boot: int = 2000,
    min_steps: int = 6,
    seed: int = 0,
) -> PairedResult:
    """Compare two aligned step series (same timestamps; NaN = no data in that step).

    Args:
        control, canary: the metric per step.
        usable: extra per-step mask (e.g. both sides served enough requests).
        lower_is_better: True for latencies, False for throughputs. The ratio is
            canary/control either way; only the verdict ("better" means the canary is
            better) follows the direction.
        tolerance: relative change treated as no change (0.05 = 5%).
        confidence: two-sided level of the bootstrap interval.
        min_steps: fewer usable steps than this gives "no-data".
        seed: seeds the bootstrap; the same input gives the same interval.
    """
    from scipy import stats as sps

    control = np.asarray(control, dtype=float)
    canary = np.asarray(canary, dtype=float)
    ok = np.isfinite(control) & np.isfinite(canary) & (control > 0) & (canary > 0)
    if usable is not None:
        ok &= usable
    n_used = int(ok.sum())
    if n_used < min_steps:
        return PairedResult(
            len(control),
            n_used,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            "no-data",
            lower_is_better,
        )
    log_ratio = np.log(canary[ok] / control[ok])
    rng = np.random.default_rng(seed)
    boots = _block_bootstrap_means(log_ratio, n_boot, rng)
    alpha = 1.0 - confidence
    low, high = np.exp(np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
    if np.allclose(log_ratio, 0.0):
        p_value = 1.0
    else:
        p_value = float(sps.wilcoxon(log_ratio, zero_method="zsplit").pvalue)
    return PairedResult(
        n_steps=len(control),
        n_used=n_used,
        ratio=float(np.exp(log_ratio.mean())),
        ci_low=float(low),
        ci_high=float(high),
        median_ratio=float(np.exp(np.median(log_ratio))),
        p_value=p_value,
        verdict=classify_interval(
            float(low), float(high), tolerance, lower_is_better=lower_is_better
        ),
        lower_is_better=lower_is_better,
    )


def compare_proportions(
    control_events: float,
    control_total: float,
    canary_events: float,
    canary_total: float,
    *,
    alpha: float = 0.05,
    min_total: float = 20.0,
) -> ProportionResult:
    """Compare event rates (e.g. aborts per request) pooled over the window.

    Fisher's exact test on the 2x2 table gives the p-value, so zero or sparse counts are
    handled exactly; the rate ratio's interval is Katz's log interval with a 0.5 correction.
    The verdict is "worse" only when the canary's rate is higher and the test is significant.
    """
    from scipy import stats as sps

    if control_total < min_total or canary_total < min_total:
        return ProportionResult(
            control_events,
            control_total,
            canary_events,
            canary_total,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            "no-data",
        )
    a, n1 = canary_events + 0.5, canary_total + 0.5
    c, n2 = control_events + 0.5, control_total + 0.5
    ratio = (a / n1) / (c / n2)
    se = math.sqrt(max(1 / a - 1 / n1 + 1 / c - 1 / n2, 0.0))
    z = float(sps.norm.ppf(1 - alpha / 2))
    low, high = ratio * math.exp(-z * se), ratio * math.exp(z * se)
    table = [
        [round(canary_events), round(canary_total - canary_events)],
        [round(control_events), round(control_total - control_events)],
    ]
    p_value = float(sps.fisher_exact(table).pvalue)
    canary_rate = canary_events / canary_total
    control_rate = control_events / control_total
    verdict: Verdict = "same"
    if p_value < alpha:
        verdict = "worse" if canary_rate > control_rate else "better"
    return ProportionResult(
        control_events,
        control_total,
        canary_events,
        canary_total,
        ratio,
        low,
        high,
        p_value,
        verdict,
    )
