"""Canary vs control over a window of Prometheus data: the readout.

Each arm is one replica, selected by the labels the rendered scrape config gives its series
(``container_name`` by default). For every metric, both arms are queried over the same steps,
compared pairwise (:mod:`tierctl.readout.stats`), and the verdict is combined: any guard
metric (TTFT, E2E) or the abort rate getting worse fails the canary; otherwise the canary
passes when every metric had data and no guard's interval reaches past the tolerance on the
bad side; anything else is inconclusive.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tierctl.engines import (
    PROFILES,
    EngineProfile,
    MetricRef,
    default_profile,
    profile_for_metrics,
    profile_for_prefix,
)
from tierctl.errors import InputError
from tierctl.quantity import Direction, Unit
from tierctl.readout.metrics import DEFAULT_METRICS, MetricDef
from tierctl.readout.stats import (
    PairedResult,
    ProportionResult,
    compare_paired,
    compare_proportions,
    not_worse_than,
)
from tierctl.runtime.promapi import PrometheusClient, Series
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
    unit: Unit = Unit.SECONDS  # of the medians; the ratio is canary/control, unitless


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
    engine: str = ""
    #: Metric families present for one arm or half-window and absent for the other, by name.
    drift: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes null)."""
        out: dict[str, Any] = plain_data(self)
        return out


def plain_data(value: Any) -> Any:
    """A readout's dataclasses as plain data for JSON: NaN becomes null, enums their value."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: plain_data(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


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


@dataclass(frozen=True)
class _Query:
    """The window as PromQL needs it: the step grid and the rate window."""

    client: PrometheusClient
    engine: EngineProfile
    prefix: str
    grid: np.ndarray
    step_s: float

    @property
    def first(self) -> float:
        return float(self.grid[0])

    @property
    def last(self) -> float:
        return float(self.grid[-1])

    @property
    def win(self) -> str:
        return _window(self.step_s)

    def series(self, expr: str) -> np.ndarray:
        return _on_grid(
            self.client.query_range(expr, self.first, self.last, self.step_s), self.grid
        )

    def range(self, expr: str) -> list[Series]:
        return self.client.query_range(expr, self.first, self.last, self.step_s)


def resolve_engine(
    client: PrometheusClient, engine: EngineProfile | None, prefix: str | None
) -> tuple[EngineProfile, str]:
    """The engine and metric prefix of a readout: a given prefix names its engine; else the
    given engine (the spec's) with its prefix detected; else whichever engine's series the
    server holds.

    Raises:
        InputError: a prefix no engine uses, or one that is not the given engine's.
    """
    if prefix is not None:
        owner = profile_for_prefix(prefix)
        if owner is None:
            known = ", ".join(p for e in PROFILES.values() for p in e.metric_prefixes)
            raise InputError(
                f"no engine exports metrics under the prefix {prefix!r}",
                rule="readout-prefix",
                value=prefix,
                fix=f"use one of {known}, or leave the prefix out to detect it",
            )
        if engine is not None and owner is not engine:
            raise InputError(
                f"the prefix {prefix!r} is {owner.title}'s, the spec's engine is {engine.title}",
                rule="readout-prefix",
                value=prefix,
                fix=f"use one of {', '.join(engine.metric_prefixes)}, or leave the prefix out",
            )
        return owner, prefix
    names = client.metric_names()
    if engine is None:
        engine = profile_for_metrics(names) or default_profile()
    return engine, engine.series_prefix(names)


#: The most steps one readout may ask for: Prometheus answers at most 11,000 points per
#: series, and every step costs each metric's arrays (``judge serve``'s
#: ``/argo?window=10000000h`` asked for 120 million and took 4.4 GB before any query).
MAX_STEPS = 11_000


def step_grid(start_s: float, end_s: float, step_s: float) -> np.ndarray:
    """The ends of the steps of ``(start_s, end_s]`` (each value covers ``(t - step, t]``).

    Raises:
        InputError: an empty or infinite window, or more than :data:`MAX_STEPS` steps.
    """
    span = end_s - start_s
    if not (math.isfinite(span) and math.isfinite(step_s)) or span <= 0 or step_s <= 0:
        raise InputError(
            "the window is empty" if span <= 0 or step_s <= 0 else "the window is infinite",
            rule="readout-window",
            value=f"{start_s}..{end_s} step {step_s}",
            fix="give an `end_s` after `start_s` and a positive `step_s`",
            params=("start_s", "end_s", "step_s"),
        )
    if span / step_s > MAX_STEPS:
        raise InputError(
            f"the window holds {span / step_s:,.0f} steps of {step_s:g} s",
            rule=f"a readout asks for at most {MAX_STEPS:,} steps (Prometheus's points per series)",
            value=f"{span:g} s",
            fix=f"shorten the window to at most {MAX_STEPS * step_s:g} s, or lengthen the step",
        )
    grid: np.ndarray = np.arange(start_s + step_s, end_s + step_s / 2, step_s)
    return grid


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
    engine: EngineProfile | None = None,
    min_requests_per_step: float = 3.0,
    tolerance: float = 0.05,
    variant_label: str = "config_variant",
    seed: int = 0,
) -> Readout:
    """Query both arms over [start, end] in steps and judge the canary.

    Phases: the engine and prefix; the step grid; per-step request counts (which steps are
    usable); the paired metric comparisons; the pooled abort rates; the variants each arm
    reported; the metric-name drift between arms and halves of the window; the verdict.

    Args:
        client: a Prometheus client.
        control, canary: the arms.
        start_s, end_s: the window (Unix seconds).
        step_s: step and rate window; each step is one pair.
        prefix: metric prefix (one of an engine profile's ``metric_prefixes``); detected when
            None.
        engine: the engine profile (the spec's); detected from the server's names when None.
        min_requests_per_step: steps where an arm finished fewer requests are not compared.
        tolerance: relative change treated as no change.
        seed: bootstrap seed.
    """
    grid = step_grid(start_s, end_s, step_s)
    profile, prefix = resolve_engine(client, engine, prefix)
    q = _Query(client, profile, prefix, grid, step_s)
    arms = (control, canary)
    usable = _usable_steps(q, arms, min_requests_per_step)
    rows = [_compare_metric(q, m, control, canary, usable, tolerance, seed) for m in metrics]
    aborts = _pooled_aborts(q, control, canary, start_s, end_s)
    variants, warnings = _variants_seen(q, arms, variant_label)
    drift = metric_drift(q, arms, [m.family(profile) for m in metrics])
    drifted = drift_for(rows, metrics, profile, prefix, drift)
    verdict, reasons = judge_canary(rows, aborts, drifted, tolerance)
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
        tuple(warnings) + tuple(drift),
        engine=profile.kind,
        drift=tuple(drift),
    )


def _usable_steps(q: _Query, arms: tuple[Arm, Arm], min_requests: float) -> np.ndarray:
    """Steps where both arms finished at least ``min_requests`` requests."""
    finished = q.engine.metrics.finished
    counts = [
        q.series(f"sum(increase({q.engine.selector(finished, q.prefix, arm.matchers)}[{q.win}]))")
        for arm in arms
    ]
    both: np.ndarray = (np.nan_to_num(counts[0]) >= min_requests) & (
        np.nan_to_num(counts[1]) >= min_requests
    )
    return both


def _compare_metric(
    q: _Query,
    metric: MetricDef,
    control: Arm,
    canary: Arm,
    usable: np.ndarray,
    tolerance: float,
    seed: int,
) -> MetricReadout:
    c = q.series(metric.expr(q.engine, q.prefix, control.matchers, q.win))
    k = q.series(metric.expr(q.engine, q.prefix, canary.matchers, q.win))
    result = compare_paired(
        c,
        k,
        usable=usable if metric.kind == "latency" else None,
        lower_is_better=metric.quantity.direction is Direction.LOWER_IS_BETTER,
        tolerance=tolerance,
        seed=seed,
    )
    return MetricReadout(
        metric.key,
        metric.title,
        metric.guard,
        float(np.nanmedian(c)) if np.isfinite(c).any() else math.nan,
        float(np.nanmedian(k)) if np.isfinite(k).any() else math.nan,
        result,
        metric.quantity.unit,
    )


def _pooled_aborts(
    q: _Query, control: Arm, canary: Arm, start_s: float, end_s: float
) -> ProportionResult:
    """Aborted vs all requests of each arm, pooled over the window."""
    span = f"{round(end_s - start_s)}s"

    def pooled(ref: MetricRef, arm: Arm) -> float:
        expr = f"sum(increase({q.engine.selector(ref, q.prefix, arm.matchers)}[{span}]))"
        found = q.client.query(expr, end_s)
        return found[0][1] if found and math.isfinite(found[0][1]) else 0.0

    m = q.engine.metrics
    counts = [(pooled(m.aborted, arm), pooled(m.finished, arm)) for arm in (control, canary)]
    (ca, cf), (ka, kf) = counts
    return compare_proportions(ca, cf + ca, ka, kf + ka)


def _variants_seen(
    q: _Query, arms: tuple[Arm, Arm], variant_label: str
) -> tuple[dict[str, list[str]], list[str]]:
    """The variants each arm's series carried in the window, and warnings about them."""
    variants: dict[str, list[str]] = {}
    warnings: list[str] = []
    for arm in arms:
        sel = q.engine.selector(q.engine.metrics.running, q.prefix, arm.matchers)
        seen = sorted(
            {
                s.labels.get(variant_label, "")
                for s in q.range(f"count by ({variant_label}) ({sel})")
            }
        )
        variants[arm.replica] = seen
        if arm.expected_variant and seen and seen != [arm.expected_variant]:
            warnings.append(
                f"{arm.replica} reported {', '.join(v or '(none)' for v in seen)} in the window, "
                f"expected only {arm.expected_variant}: the window mixes configurations"
            )
        if not seen:
            warnings.append(f"no series for {arm.replica} ({arm.matchers}) in the window")
    return variants, warnings


def metric_drift(q: _Query, arms: tuple[Arm, Arm], families: list[MetricRef]) -> list[str]:
    """Families the readout reads that one arm (or one half of the window) has and the other
    lacks, each named with where it is missing and, when found, the name it has there instead
    (another prefix spelling, another engine's name for the same quantity).

    One query per arm: every engine series name that arm carried, by step.
    """
    names = {
        "running": q.engine.metrics.running,
        "finished": q.engine.metrics.finished.name,
        "aborted": q.engine.metrics.aborted.name,
    }
    wanted = list(dict.fromkeys([*(f.name for f in families), *names.values()]))
    every_prefix = sorted({p for e in PROFILES.values() for p in e.metric_prefixes})
    pattern = "|".join(re.escape(p) for p in every_prefix)
    mid = (q.first + q.last) / 2
    seen: dict[str, dict[str, set[bool]]] = {}
    for arm in arms:
        expr = f'count by (__name__) ({{__name__=~"({pattern}).+",{arm.matchers}}})'
        halves: dict[str, set[bool]] = {}
        for s in q.range(expr):
            name = s.labels.get("__name__", "")
            halves.setdefault(name, set()).update(t > mid for t in s.times_s)
        seen[arm.replica] = halves
    a, b = (arm.replica for arm in arms)
    if not seen[a] and not seen[b]:
        return []  # nothing at all: the "no series" warnings say it
    out: list[str] = []
    for family in wanted:
        full = f"{q.prefix}{family}"
        has = {arm: full in seen[arm] for arm in (a, b)}
        if has[a] != has[b]:
            present, absent = (a, b) if has[a] else (b, a)
            if seen[absent]:
                alt = _alternatives(q.engine, family, seen[absent])
                instead = f"; {absent} has {', '.join(alt)} instead" if alt else ""
                out.append(f"{full} is present for {present} and absent for {absent}{instead}")
            continue
        for replica in (a, b):
            span = seen[replica].get(full)
            if span == {False}:
                out.append(
                    f"{full} for {replica} is present only in the first half of the window, "
                    "absent in the second"
                )
            elif span == {True}:
                # A family that only starts later is how a freshly started or idle engine
                # looks (histograms appear with their first observation); it is drift only
                # when something else of that arm stopped at the same time (a rename).
                stopped = sorted(n for n, s in seen[replica].items() if s == {False})
                if stopped:
                    out.append(
                        f"{full} for {replica} is present only in the second half of the "
                        f"window, absent in the first, where {', '.join(stopped[:3])} stopped"
                    )
    if not any(f"{q.prefix}{f}" in seen[r] for r in (a, b) for f in wanted):
        found = sorted({n for r in (a, b) for n in seen[r]})[:5]
        out.append(
            f"no {q.prefix} series for either arm; the window holds {', '.join(found)}: "
            "is the spec's engine (or the metric prefix asked for) the one these replicas run?"
        )
    return out


def _alternatives(engine: EngineProfile, family: str, names: dict[str, set[bool]]) -> list[str]:
    """Names the same quantity has elsewhere: other prefix spellings, the engine's earlier
    names for it, or another engine's name."""
    families = engine.families()
    role = next((r for r, n in families.items() if n == family), None)
    candidates = {p + family for p in engine.metric_prefixes}
    if role is not None:
        suffix = "_bucket" if family.endswith("_bucket") else ""
        for old in engine.metric_aliases.get(role, ()):
            candidates |= {p + old + suffix for p in engine.metric_prefixes}
        for other in PROFILES.values():
            name = other.families().get(role)
            if name is not None:
                candidates |= {p + name for p in other.metric_prefixes}
    return sorted(c for c in candidates if c in names)


def drift_for(
    rows: list[MetricReadout],
    metrics: tuple[MetricDef, ...],
    engine: EngineProfile,
    prefix: str,
    drift: list[str],
) -> dict[str, list[str]]:
    """The drift lines that explain each metric row (by title)."""
    out: dict[str, list[str]] = {}
    for row, metric in zip(rows, metrics, strict=True):
        full = f"{prefix}{metric.family(engine).name}"
        found = [d for d in drift if d.startswith(full + " ") or d.startswith("no ")]
        if found:
            out[row.title] = found
    return out


def judge_canary(
    rows: list[MetricReadout],
    aborts: ProportionResult,
    drift: dict[str, list[str]] | None = None,
    tolerance: float | None = None,
) -> tuple[Overall, list[str]]:
    """The overall verdict of per-metric comparisons, and its reasons.

    ``fail`` when a guard metric or the abort rate is worse; else ``inconclusive`` when a
    metric had no data (named by the metric-name drift that explains it, from ``drift``: row
    title -> drift lines) or a guard is undecided; else ``pass``. Pure: no Prometheus needed.

    A guard is undecided when its interval is wider than the tolerance *in the bad
    direction* (docs/readout.md): with ``tolerance`` given, a guard whose interval stays at or
    below ``1 + tolerance`` is shown not worse even where it reaches past the "better" side
    (a canary that is probably much faster is not a risk). Without it, every guard whose
    interval is not inside the band counts as undecided.
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
        drift = drift or {}
        named = sorted({d for title in missing for d in drift.get(title, [])})
        plain = [t for t in missing if t not in drift]
        out = [f"metric names differ: {d}" for d in named]
        if plain:
            out.append(f"not enough paired steps for {', '.join(plain)}")
        return "inconclusive", out
    undecided = [row for row in rows if row.guard and row.result.verdict == "inconclusive"]
    not_worse = [
        row for row in undecided if tolerance is not None and not_worse_than(row.result, tolerance)
    ]
    unsure = [row.title for row in undecided if row not in not_worse]
    if unsure:
        return "inconclusive", [f"guard metrics undecided: {', '.join(unsure)}"]
    better = [row.title for row in rows if row.result.verdict == "better"]
    reason = f"better on {', '.join(better)}; no guard worse" if better else "no guard worse"
    reasons = [reason]
    if not_worse:
        shown = ", ".join(
            f"{row.title} (at {'most' if row.result.lower_is_better else 'least'} "
            f"{row.result.ci_high if row.result.lower_is_better else row.result.ci_low:.2f}x)"
            for row in not_worse
        )
        reasons.append(f"shown not worse than +{tolerance:.0%}: {shown}")
    return "pass", reasons
