"""Uncertainty on every what-if: intervals, the A/A floor, verdicts, extrapolation.

A ratio of 0.58 means nothing without how sure the model is of it. Two things make a
predicted ratio uncertain, and both are drawn here:

* **the fit's own uncertainty**: a fitted cost model's coefficients are refitted on bootstrap
  resamples of its fit's steps (``sim fit`` stores them in the cost model file's
  ``provenance.uncertainty``), and each sample prices the steps of both arms;
* **the steps' jitter** (``CostModel.step_jitter``): each arm is simulated with its own draw,
  as two real runs of an A/B are two runs.

For each sample the two arms run on the identical workload, and so does an A/A pair (the
control against itself, with different draws): the 5-95 % range of the A/B ratios is the
predicted interval, the A/A ratios' range is the floor below which a run cannot tell an
effect from noise. A ratio whose interval reaches inside the floor is "no measurable effect".
A derived preset (no fit, no jitter) has no uncertainty of its own, and the output says so.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tierctl.quantity import Direction, judge_ratio
from tierctl.sim import budget
from tierctl.sim.cost import CostModel
from tierctl.sim.disagg_config import ArmConfig, DisaggTier
from tierctl.sim.domain import StepDomain
from tierctl.sim.result import COMPARE_METRICS, RatioRow
from tierctl.sim.simulate import Comparison, compare, simulate
from tierctl.sim.workload import Workload

#: The predicted interval's quantiles (a 90 % interval).
INTERVAL = (0.05, 0.95)

#: The floor a deterministic model's verdicts are judged against when no measured A/A floor
#: is given: a model with no noise of its own would call a 1 % change an effect, which no
#: real A/B resolves.
DETERMINISTIC_FLOOR = 0.05

# Figures where higher is better (completion); the rest are latencies.
_HIGHER_IS_BETTER = frozenset({"completion"})


def block_bootstrap(n: int, samples: int, seed: int) -> list[list[int]]:
    """``samples`` moving-block bootstrap resamples of ``range(n)``: blocks of about
    ``sqrt(n)`` consecutive indices drawn with replacement until ``n`` are taken."""
    rng = random.Random(seed)
    block = max(1, round(math.sqrt(n)))
    out = []
    for _ in range(samples):
        idx: list[int] = []
        while len(idx) < n:
            start = rng.randrange(0, max(1, n - block + 1))
            idx.extend(range(start, min(n, start + block)))
        out.append(idx[:n])
    return out


@dataclass(frozen=True)
class FitUncertainty:
    """What a cost model knows about itself: bootstrap refits and the domain it was fitted on.

    Attributes:
        samples: the model with each bootstrap refit's step coefficients (empty: none stored).
        domain: the step shapes the fit saw (None: unknown, e.g. a preset).
        method: how the samples were drawn, for the output.
    """

    samples: tuple[CostModel, ...] = ()
    domain: StepDomain | None = None
    method: str = ""

    @classmethod
    def from_provenance(cls, model: CostModel, prov: Mapping[str, Any]) -> FitUncertainty:
        """Read a cost model file's ``provenance.uncertainty`` and ``provenance.domain``;
        malformed entries are ignored (the model itself was validated on reading)."""
        unc = prov.get("uncertainty")
        samples: list[CostModel] = []
        method = ""
        if isinstance(unc, Mapping):
            method = str(unc.get("method", ""))
            for coefs in unc.get("samples") or ():
                if not isinstance(coefs, Mapping):
                    continue
                good: dict[str, Any] = {
                    k: float(v)
                    for k, v in coefs.items()
                    if k in _COEFFICIENTS and isinstance(v, int | float) and math.isfinite(v)
                }
                if good and all(v >= 0 for v in good.values()):
                    samples.append(dataclasses.replace(model, **good))
        return cls(tuple(samples), StepDomain.from_json(prov.get("domain")), method)


_COEFFICIENTS = frozenset(
    f.name for f in dataclasses.fields(CostModel) if f.name.endswith("_s") and f.type == "float"
)


@dataclass(frozen=True)
class IntervalRow:
    """One figure of a what-if: the point ratio, its interval, the A/A floor and the verdict."""

    metric: str
    control: float | None
    candidate: float | None
    ratio: float | None
    low: float | None
    high: float | None
    floor: float  # the A/A floor: ratios within [1/(1+f), 1+f] are noise
    verdict: str  # better | worse | no measurable effect | unknown | not modelled: --FLAG
    # Flags that differ between the arms whose effect the ratio leaves out (step cost held
    # fixed, or not read by the model): with nothing else differing the ratio is 1.00 by
    # construction, and the verdict says "not modelled" instead of "no measurable effect".
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class WhatIf:
    """A comparison with its uncertainty: the rows, and what the model could not say."""

    comparison: Comparison
    rows: tuple[IntervalRow, ...]
    draws: int  # simulated pairs behind each interval (1: a deterministic model)
    uncertainty: str  # where the intervals come from, in words
    extrapolation: tuple[str, ...]  # shapes past the fit's domain ("" when within)


def what_if(
    control: ArmConfig,
    candidate: ArmConfig,
    workload: Workload,
    cost: CostModel,
    fit: FitUncertainty | None = None,
    *,
    draws: int = 20,
    seed: int = 0,
    aa_floor: float | Mapping[str, float] = 0.0,
    focus: str | None = None,
) -> WhatIf:
    """Compare two arms with intervals on every ratio.

    Args:
        control, candidate: the arms.
        workload: the identical workload both run.
        cost: the cost model (the point estimate's).
        fit: its bootstrap refits and domain (None or empty: jitter only).
        draws: simulated A/B and A/A pairs per interval (used only when the model has
            jitter or refits; a deterministic model needs one).
        seed: the first jitter draw.
        aa_floor: a measured A/A floor (relative: 0.2 means ratios in [0.83, 1.2] are noise),
            one for every figure or one per metric label, e.g. from the operator's own
            ``bench ab`` runs of identical arms: it widens the simulated floor, and where it
            is wider than the simulated one the interval too, by the excess (the run noise
            one real A/B carries and the model does not reproduce).
        focus: only requests whose id starts with it.
    """
    fit = fit or FitUncertainty()
    random_model = cost.jittery or bool(fit.samples)
    n = max(1, draws) if random_model else 0
    # Every draw simulates three runs: their sum is checked before the first one starts.
    _check_work(((control, 1 + 2 * n), (candidate, 1 + n)), workload, cost)
    point = compare(control, candidate, workload, cost, focus=focus, seed=seed)
    ab: list[list[float | None]] = []
    aa: list[list[float | None]] = []
    for i in range(n):
        model = fit.samples[i % len(fit.samples)] if fit.samples else cost
        a = _summary(control, workload, model, seed + 2 * i + 1, focus)
        a2 = _summary(control, workload, model, seed + 2 * i + 2, focus)
        b = _summary(candidate, workload, model, seed + 2 * i + 2, focus)
        ab.append(_ratios(a, b))
        aa.append(_ratios(a, a2))
    rows = tuple(
        _row(
            r, [x[j] for x in ab], [x[j] for x in aa], _floor_for(aa_floor, r.metric), random_model
        )
        for j, r in enumerate(point.table)
    )
    rows = _mark_left_out(rows, point)
    return WhatIf(point, rows, max(n, 1), _source(cost, fit, n), _extrapolation(point, fit.domain))


def _mark_left_out(rows: tuple[IntervalRow, ...], point: Comparison) -> tuple[IntervalRow, ...]:
    """Name on every row the differing flags the ratio leaves out. When the two arms'
    simulations are identical (every point ratio exactly 1 and the same steps: the only
    differences are flags the model holds fixed or does not read, e.g. ``--dtype float32``
    against ``bfloat16``), the verdict is ``not modelled: --FLAG``: a 1.00 there is the
    model's blindness, not a measurement of no effect."""
    left_out = tuple(dict.fromkeys((*point.step_cost, *point.not_modelled)))
    if not left_out:
        return rows
    names = ", ".join(f"--{n}" for n in left_out)
    blind = point.control.summary == point.candidate.summary
    out = []
    for r in rows:
        verdict = f"not modelled: {names}" if blind else f"{r.verdict} (leaves out {names})"
        out.append(dataclasses.replace(r, verdict=verdict, left_out=left_out))
    return tuple(out)


def _check_work(arms: Sequence[tuple[ArmConfig, int]], workload: Workload, cost: CostModel) -> None:
    """Refuse a comparison whose runs together are past the work bound (a disaggregated arm
    is bounded by its own step limit instead)."""
    total: budget.WorkEstimate | None = None
    runs = 0
    for arm, k in arms:
        runs += k
        if isinstance(arm, DisaggTier):
            continue
        est = budget.estimate(arm, workload.requests, cost, runs=k)
        total = est if total is None else total.plus(est)
    if total is not None:
        budget.check(total, what=f"the comparison ({runs} simulated runs)")


def _floor_for(aa_floor: float | Mapping[str, float], metric: str) -> float:
    """The measured A/A floor of ``metric`` (one figure for all, or one per metric)."""
    if isinstance(aa_floor, Mapping):
        return float(aa_floor.get(metric, 0.0))
    return float(aa_floor)


def _summary(cfg: ArmConfig, wl: Workload, model: CostModel, seed: int, focus: str | None) -> Any:
    res = simulate(cfg, wl, model, seed=seed)
    return res.subset(focus) if focus else res.summary


def _ratios(a: Any, b: Any) -> list[float | None]:
    out: list[float | None] = []
    for _label, attr in COMPARE_METRICS:
        x, y = getattr(a, attr), getattr(b, attr)
        out.append(y / x if x and y is not None else None)
    return out


def _quantiles(values: Sequence[float | None]) -> tuple[float, float] | None:
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    lo = vals[min(len(vals) - 1, int(INTERVAL[0] * len(vals)))]
    hi = vals[min(len(vals) - 1, math.ceil(INTERVAL[1] * len(vals)) - 1)]
    return lo, hi


def _row(
    point: RatioRow,
    ab: Sequence[float | None],
    aa: Sequence[float | None],
    aa_floor: float,
    random_model: bool,
) -> IntervalRow:
    interval = _quantiles(ab) if random_model else None
    if interval is None and point.ratio is not None and not random_model:
        interval = (point.ratio, point.ratio)
    aa_q = _quantiles(aa)
    floor = aa_floor if random_model else max(aa_floor, DETERMINISTIC_FLOOR)
    simulated = 0.0
    if aa_q is not None:
        simulated = max(aa_q[1] - 1.0, 1.0 / aa_q[0] - 1.0 if aa_q[0] > 0 else 0.0)
        floor = max(floor, simulated)
    lo, hi = interval if interval is not None else (None, None)
    if point.ratio is not None and lo is not None and hi is not None:
        # The point estimate is one draw too: keep it inside its own interval.
        lo, hi = min(lo, point.ratio), max(hi, point.ratio)
        if aa_floor > simulated:
            # A measured A/A floor wider than the simulated one is run-to-run noise the
            # model does not reproduce (a busy host's stalls, slow stretches); one real A/B
            # run carries it, so the interval does too, by the excess (log scale).
            widen = (1.0 + aa_floor) / (1.0 + simulated)
            lo, hi = lo / widen, hi * widen
    direction = (
        Direction.HIGHER_IS_BETTER
        if point.metric in _HIGHER_IS_BETTER
        else Direction.LOWER_IS_BETTER
    )
    change = judge_ratio(lo, hi, direction, floor)
    verdict = {"better": "better", "worse": "worse"}.get(change, "no measurable effect")
    if lo is None:
        verdict = "unknown"
    return IntervalRow(
        point.metric, point.control, point.candidate, point.ratio, lo, hi, floor, verdict
    )


def _source(cost: CostModel, fit: FitUncertainty, n: int) -> str:
    if fit.samples:
        return (
            f"intervals: {n} draws of the fit's {len(fit.samples)} bootstrap refits "
            f"({fit.method or 'over its steps'}) and the step jitter (sigma {cost.step_jitter:.2f}"
            + (
                f"; slow stretches sigma {cost.step_jitter_slow:.2f} every "
                f"{cost.step_jitter_block} steps)"
                if cost.step_jitter_slow > 0
                else ")"
            )
        )
    if cost.step_jitter > 0:
        return (
            f"intervals: {n} draws of the step jitter (sigma {cost.step_jitter:.2f}); the cost "
            "model carries no bootstrap refits, so the fit's own uncertainty is left out"
        )
    return (
        "no intervals: the cost model is deterministic (a derived preset: no fit, no jitter), "
        "so the ratios are point figures; fit a model (`tierctl sim fit`) for intervals"
    )


def _extrapolation(point: Comparison, domain: StepDomain | None) -> tuple[str, ...]:
    """Each step shape either arm produced past the fit's domain (the larger arm's figure)."""
    if domain is None:
        return ()
    seen = StepDomain()
    for res in (point.control, point.candidate):
        seen = seen.union(StepDomain.from_json(res.domain) or StepDomain())
    return tuple(seen.beyond(domain))
