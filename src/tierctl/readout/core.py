"""Canary vs control over a window of Prometheus data: the readout.

Each arm is one replica, selected by the labels the rendered scrape config gives its series
(``container_name`` by default). For every metric, both arms are queried over the same steps,
compared pairwise (:mod:`tierctl.readout.stats`), and the verdict is combined: any guard
metric (TTFT, E2E) or the abort rate getting worse fails the canary; otherwise the canary
passes when every metric had data; anything else is inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tierctl.errors import InputError
from tierctl.readout.metrics import (
    ABORTS_COUNTER,
    DEFAULT_METRICS,
    REQUESTS_COUNTER,
    MetricDef,
    detect_prefix,
)
from tierctl.readout.prom import PrometheusClient, Series
from tierctl.readout.stats import (
    PairedResult,
    ProportionResult,
    compare_paired,
    compare_proportions,
)
from tierctl.spec.effective import Tier

Overall = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a replica and the PromQL matchers selecting its series."""

    replica: str
    matchers: str  # e.g. container_name="model-r1"
    expected_variant: str | None = None


@dataclass(frozen=True)
class MetricReadout:
    """One row of the readout table."""

    key: str
    title: str
    guard: bool
    control_median: float
    canary_median: float
    result: PairedResult


@dataclass(frozen=True)
class Readout:
    """Everything a readout found, and its verdict."""

    control: Arm
    canary: Arm
    start_s: float
    end_s: float
    step_s: float
    prefix: str
    metrics: tuple[MetricReadout, ...]
    aborts: ProportionResult
    variants_seen: dict[str, list[str]]
    verdict: Overall
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes null)."""

        def clean(value: Any) -> Any:
            if isinstance(value, float):
                return None if math.isnan(value) else value
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            if hasattr(value, "__dataclass_fields__"):
                return {k: clean(getattr(value, k)) for k in value.__dataclass_fields__}
            return value

        out: dict[str, Any] = clean(self)
        return out


def arms_from_tier(
    tier: Tier, control: str | None, canary: str | None, label: str = "container_name"
) -> tuple[Arm, Arm]:
    """The control and canary arms: named replicas, else the spec's roles."""

    def pick(name: str | None, role: str) -> str:
        if name is not None:
            if name not in tier.replicas:
                raise InputError(
                    f"replica {name!r} is not in the spec",
                    rule="unknown-replica",
                    value=name,
                    fix=f"use one of {', '.join(tier.replicas)}",
                )
            return name
        found = [r.name for r in tier.replicas.values() if r.role == role]
        if len(found) != 1:
            raise InputError(
                f"cannot tell which replica is the {role}: {len(found)} have role {role}",
                rule="readout-arms",
                fix=f"pass --{role} REPLICA",
            )
        return found[0]

    arms = []
    for name, role in ((control, "control"), (canary, "canary")):
        replica = tier.replicas[pick(name, role)]
        arms.append(Arm(replica.name, f'{label}="{replica.service}"', replica.variant))
    if arms[0].replica == arms[1].replica:
        raise InputError(
            "control and canary are the same replica",
            rule="readout-arms",
            fix="pick two different replicas",
        )
    return arms[0], arms[1]


def _on_grid(series: list[Series], grid: np.ndarray) -> np.ndarray:
    """Values of a single-series result on the step grid (NaN where absent)."""
    out = np.full(len(grid), np.nan)
    if not series:
        return out
    index = {round(t, 3): i for i, t in enumerate(grid)}
    for t, v in zip(series[0].times_s, series[0].values, strict=True):
        i = index.get(round(t, 3))
        if i is not None:
            out[i] = v
    return out


def _window(step_s: float) -> str:
    return f"{max(1, round(step_s))}s"


def run_readout(
    client: PrometheusClient,
    control: Arm,
    canary: Arm,
    *,
    start_s: float,
    end_s: float,
    step_s: float,
    metrics: tuple[MetricDef, ...] = DEFAULT_METRICS,
    prefix: str | None = None,
    min_requests_per_step: float = 3.0,
    tolerance: float = 0.05,
    variant_label: str = "config_variant",
    seed: int = 0,
) -> Readout:
    """Query both arms over [start, end] in steps and judge the canary.

    Args:
        client: a Prometheus client.
        control, canary: the arms.
        start_s, end_s: the window (Unix seconds).
        step_s: step and rate window; each step is one pair.
        prefix: metric prefix; detected from the server's names when None.
        min_requests_per_step: steps where an arm finished fewer requests are not compared.
        tolerance: relative change treated as no change.
        seed: bootstrap seed.
    """
    if end_s <= start_s or step_s <= 0:
        raise InputError(
            "the window is empty",
            rule="readout-window",
            value=f"{start_s}..{end_s} step {step_s}",
            fix="give a positive --window and --step",
        )
    prefix = prefix or detect_prefix(client.metric_names())
    # Steps are labelled by their end: each value covers (t - step, t].
    grid = np.arange(start_s + step_s, end_s + step_s / 2, step_s)
    first, last, win = float(grid[0]), float(grid[-1]), _window(step_s)

    def series(expr: str) -> np.ndarray:
        return _on_grid(client.query_range(expr, first, last, step_s), grid)

    req_expr = f'sum(increase({{__name__="{prefix}{REQUESTS_COUNTER}",{{m}}}}[{win}]))'
    requests = {
        arm.replica: series(req_expr.replace("{m}", arm.matchers)) for arm in (control, canary)
    }
    usable = (np.nan_to_num(requests[control.replica]) >= min_requests_per_step) & (
        np.nan_to_num(requests[canary.replica]) >= min_requests_per_step
    )
    rows = []
    for metric in metrics:
        c = series(metric.expr(prefix, control.matchers, win))
        k = series(metric.expr(prefix, canary.matchers, win))
        result = compare_paired(
            c,
            k,
            usable=usable if metric.kind == "latency" else None,
            lower_is_better=metric.kind == "latency",
            tolerance=tolerance,
            seed=seed,
        )
        rows.append(
            MetricReadout(
                metric.key,
                metric.title,
                metric.guard,
                float(np.nanmedian(c)) if np.isfinite(c).any() else math.nan,
                float(np.nanmedian(k)) if np.isfinite(k).any() else math.nan,
                result,
            )
        )
    total = f'sum(increase({{__name__="{prefix}{{c}}",{{m}}}}[{round(end_s - start_s)}s]))'

    def pooled(counter: str, arm: Arm) -> float:
        found = client.query(total.replace("{c}", counter).replace("{m}", arm.matchers), end_s)
        return found[0][1] if found and math.isfinite(found[0][1]) else 0.0

    aborts = compare_proportions(
        pooled(ABORTS_COUNTER, control),
        pooled(REQUESTS_COUNTER, control) + pooled(ABORTS_COUNTER, control),
        pooled(ABORTS_COUNTER, canary),
        pooled(REQUESTS_COUNTER, canary) + pooled(ABORTS_COUNTER, canary),
    )
    variants: dict[str, list[str]] = {}
    warnings: list[str] = []
    for arm in (control, canary):
        expr = (
            f'count by ({variant_label}) ({{__name__="{prefix}num_running_reqs",{arm.matchers}}})'
        )
        seen = sorted(
            {s.labels.get(variant_label, "") for s in client.query_range(expr, first, last, step_s)}
        )
        variants[arm.replica] = seen
        if arm.expected_variant and seen and seen != [arm.expected_variant]:
            warnings.append(
                f"{arm.replica} reported {', '.join(v or '(none)' for v in seen)} in the window, "
                f"expected only {arm.expected_variant}: the window mixes configurations"
            )
        if not seen:
            warnings.append(f"no series for {arm.replica} ({arm.matchers}) in the window")
    verdict, reasons = overall_verdict(rows, aborts)
    return Readout(
        control,
        canary,
        start_s,
        end_s,
        step_s,
        prefix,
        tuple(rows),
        aborts,
        variants,
        verdict,
        tuple(reasons),
        tuple(warnings),
    )


def overall_verdict(
    rows: list[MetricReadout], aborts: ProportionResult
) -> tuple[Overall, list[str]]:
    """The overall verdict of per-metric comparisons, and its reasons.

    ``fail`` when a guard metric or the abort rate is worse; else ``inconclusive`` when a
    metric had no data or a guard is undecided; else ``pass``. Pure: no Prometheus needed.
    """
    reasons = []
    for row in rows:
        if row.guard and row.result.verdict == "worse":
            reasons.append(
                f"{row.title} is worse: {row.result.ratio:.2f}x "
                f"[{row.result.ci_low:.2f}, {row.result.ci_high:.2f}]"
            )
    if aborts.verdict == "worse":
        reasons.append(f"abort rate is worse: {aborts.rate_ratio:.2f}x (p={aborts.p_value:.3g})")
    if reasons:
        return "fail", reasons
    missing = [row.title for row in rows if row.result.verdict == "no-data"]
    if missing:
        return "inconclusive", [f"not enough paired steps for {', '.join(missing)}"]
    unsure = [row.title for row in rows if row.guard and row.result.verdict == "inconclusive"]
    if unsure:
        return "inconclusive", [f"guard metrics undecided: {', '.join(unsure)}"]
    better = [row.title for row in rows if row.result.verdict == "better"]
    reason = f"better on {', '.join(better)}; no guard worse" if better else "no guard worse"
    return "pass", [reason]
