"""The held-out what-if check: measured paired A/B ratios against ``sim compare``'s intervals.

``benchmarks/sim_whatif.py`` fits a cost model at one engine configuration, asks ``sim
compare`` what each flag change will do, then measures every change on the real engine as a
paired A/B: in each round the control and the candidate (and a second control, the A/A arm)
each run the same workload, so each round gives one ratio per figure. This module holds the
statistics that judge the prediction, kept apart so tests can break them:

* :func:`run_figures`: one run's figures, computed as the simulator's summary computes them
  (TTFT p50/p95 and TPOT p50/p90: ``sim compare``'s latency rows);
* :func:`paired_ratios`: candidate / control per round (rounds are paired, never pooled);
* :func:`pooled`: two control arms' figures per round as one control (geometric mean);
* :func:`aa_floor`: the A/A floor, the largest relative deviation the identical arms showed;
* :func:`judge`: one figure: is the measured effect beyond the floor, is the predicted
  direction right, does the measured ratio lie inside the predicted interval;
* :func:`tally`: the totals the issue's "Done when" names;
* :func:`interval_score`, :func:`null_prediction`, :func:`skill`: a proper score for a 90 %
  interval (Gneiting and Raftery's interval score, on log ratios: the width, plus 20 times
  how far outside the measurement fell), the reference predictors (1.00 inside an A/A band)
  and the skill against one (1 - score / reference score: > 0 beats it). Coverage alone
  rewards wide intervals on a noisy host; the interval score charges the width;
* :func:`score_figure`, :func:`total_skill`: one figure scored against both references (the
  null predictor's band from the measured A/A floor; ``sim compare``'s own answer with the
  candidate equal to the control), and the skill of a set's mean scores.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tierctl.latency import percentile
from tierctl.results import MeasuredRequest

#: The figures compared: ``sim compare``'s latency rows (label, percentile of TTFT or TPOT).
FIGURES: tuple[tuple[str, str, float], ...] = (
    ("TTFT p50", "ttft", 50.0),
    ("TTFT p95", "ttft", 95.0),
    ("TPOT p50", "tpot", 50.0),
    ("TPOT p90", "tpot", 90.0),
)


def run_figures(reqs: Sequence[MeasuredRequest]) -> dict[str, float | None]:
    """One run's figures (seconds), with the simulator's percentile definition."""
    values = {
        "ttft": [r.ttft_s for r in reqs],
        "tpot": [r.tpot_s for r in reqs if r.tpot_s is not None],
    }
    return {label: percentile(values[kind], q) for label, kind, q in FIGURES}


def paired_ratios(
    control: Sequence[Mapping[str, float | None]],
    candidate: Sequence[Mapping[str, float | None]],
) -> dict[str, list[float]]:
    """Candidate / control per round and figure; a round missing either figure is left out.

    Raises:
        ValueError: the two arms ran a different number of rounds (they are paired).
    """
    if len(control) != len(candidate):
        raise ValueError(f"paired arms need the same rounds: {len(control)} != {len(candidate)}")
    out: dict[str, list[float]] = {}
    for a, b in zip(control, candidate, strict=True):
        for metric in a:
            x, y = a[metric], b.get(metric)
            if x and y is not None and x > 0:
                out.setdefault(metric, []).append(y / x)
            else:
                out.setdefault(metric, [])
    return out


def pooled(
    first: Sequence[Mapping[str, float | None]], second: Sequence[Mapping[str, float | None]]
) -> list[dict[str, float | None]]:
    """Two control arms' figures pooled per round: the geometric mean of each figure (None
    where either lacks it). A candidate paired with the pool instead of one control carries
    half that control's engine-start effect: on vLLM CPU one engine start ran ~15-20 %
    slower than another with the same flags for the whole run, and every candidate paired
    with it read as 0.8x.

    Raises:
        ValueError: the two arms ran a different number of rounds.
    """
    if len(first) != len(second):
        raise ValueError(f"pooled arms need the same rounds: {len(first)} != {len(second)}")
    out: list[dict[str, float | None]] = []
    for a, b in zip(first, second, strict=True):
        row: dict[str, float | None] = {}
        for metric, x in a.items():
            y = b.get(metric)
            row[metric] = math.sqrt(x * y) if x is not None and y is not None else None
        out.append(row)
    return out


@dataclass(frozen=True)
class Measured:
    """A figure's measured ratio: the median over rounds and the rounds' range."""

    ratio: float
    low: float
    high: float
    rounds: int


def measured(ratios: Sequence[float]) -> Measured | None:
    """The median of the per-round ratios and their range (None: no round measured it)."""
    vals = [r for r in ratios if math.isfinite(r) and r > 0]
    if not vals:
        return None
    return Measured(statistics.median(vals), min(vals), max(vals), len(vals))


def aa_floor(ratios: Sequence[float]) -> float | None:
    """The A/A floor: the largest relative deviation of the identical arms' ratios, on a log
    scale both ways (0.25: ratios within [1/1.25, 1.25] are what the arms do by themselves).
    None: no A/A round measured the figure."""
    vals = [abs(math.log(r)) for r in ratios if math.isfinite(r) and r > 0]
    return math.exp(max(vals)) - 1.0 if vals else None


@dataclass(frozen=True)
class Prediction:
    """``sim compare``'s ratio and its 90 % interval for one figure."""

    ratio: float
    low: float
    high: float


@dataclass(frozen=True)
class Check:
    """One figure of one change on one workload, judged."""

    metric: str
    measured: Measured
    predicted: Prediction
    floor: float
    effect: bool  # the measured ratio lies beyond the A/A floor
    direction_right: bool  # the prediction moves the same way as the measurement
    inside: bool  # the measured ratio lies inside the predicted interval


def _sign(ratio: float, floor: float = 0.0) -> int:
    """+1 above ``1 + floor``, -1 below ``1 / (1 + floor)``, else 0."""
    if ratio > 1.0 + floor:
        return 1
    if ratio < 1.0 / (1.0 + floor):
        return -1
    return 0


def judge(metric: str, got: Measured, pred: Prediction, floor: float) -> Check:
    """Judge one figure.

    The effect is real when the median ratio lies past the A/A floor
    (``[1/(1+floor), 1+floor]``). The direction is right when the predicted ratio moves the
    same way as the measured one (a predicted 1.00 against a real effect is wrong; against
    no effect the direction is not judged and counts as right). Inside: ``low <= measured
    median <= high``.
    """
    effect = _sign(got.ratio, floor) != 0
    right = not effect or _sign(pred.ratio) == _sign(got.ratio)
    inside = pred.low <= got.ratio <= pred.high
    return Check(metric, got, pred, floor, effect, right, inside)


@dataclass(frozen=True)
class Tally:
    """The totals: direction on the figures with a real effect, and coverage of the interval."""

    effects: int
    direction_right: int
    figures: int
    inside: int

    @property
    def direction_ok(self) -> bool:
        """Right on every figure whose measured effect exceeds the A/A floor."""
        return self.direction_right == self.effects

    @property
    def inside_fraction(self) -> float:
        """The share of figures whose measured ratio lies inside the predicted interval."""
        return self.inside / self.figures if self.figures else 0.0

    @property
    def coverage_ok(self) -> bool:
        """Inside the predicted interval on at least 80 % of the figures."""
        return self.figures > 0 and self.inside >= math.ceil(0.8 * self.figures - 1e-9)


def tally(checks: Sequence[Check]) -> Tally:
    """Count ``checks`` for the bar."""
    effects = [c for c in checks if c.effect]
    return Tally(
        effects=len(effects),
        direction_right=sum(c.direction_right for c in effects),
        figures=len(checks),
        inside=sum(c.inside for c in checks),
    )


#: The predicted intervals are central 90 % intervals.
ALPHA = 0.1


def interval_score(pred: Prediction, observed: float, alpha: float = ALPHA) -> float:
    """The interval score of ``pred``'s ``[low, high]`` for ``observed``, on log ratios:
    ``(u - l) + (2 / alpha) * (l - y if y < l) + (2 / alpha) * (y - u if y > u)``. Lower is
    better; a proper score (its expectation is least when the interval's ends are the true
    ``alpha / 2`` and ``1 - alpha / 2`` quantiles), so neither a narrow interval that misses
    nor a wide one that always covers wins by itself.

    Raises:
        ValueError: a bound or the observation is not a positive finite ratio, or the
            interval is reversed.
    """
    values = (pred.low, pred.high, observed)
    if not all(math.isfinite(v) and v > 0 for v in values) or pred.low > pred.high:
        raise ValueError(f"interval score needs 0 < low <= high and a ratio > 0: {values}")
    lo, hi, y = (math.log(v) for v in values)
    score = hi - lo
    if y < lo:
        score += 2.0 / alpha * (lo - y)
    elif y > hi:
        score += 2.0 / alpha * (y - hi)
    return score


def null_prediction(floor: float) -> Prediction:
    """A predictor of no effect: 1.00 with the band ``[1 / (1 + floor), 1 + floor]`` (the
    null predictor with the measured A/A floor; "the fit's own engine, no change" with the
    simulated one)."""
    return Prediction(1.0, 1.0 / (1.0 + floor), 1.0 + floor)


def mean_score(preds: Sequence[Prediction], observed: Sequence[float]) -> float:
    """The mean interval score of each prediction against its observation (paired)."""
    if not preds or len(preds) != len(observed):
        raise ValueError(f"need paired predictions and observations: {len(preds)}, {len(observed)}")
    return statistics.fmean(interval_score(p, y) for p, y in zip(preds, observed, strict=True))


def skill(score: float, reference: float) -> float:
    """The skill against a reference: ``1 - score / reference`` (1 perfect, 0 no better than
    the reference, < 0 worse). A reference score of 0 (a zero-width interval that held every
    observation) leaves skill undefined: 0 when equal, else -inf."""
    if reference <= 0:
        return 0.0 if score <= reference else -math.inf
    return 1.0 - score / reference


#: The references every prediction is scored against: the null predictor (1.00 inside the
#: measured A/A band) and "the fit's own engine, no change" (``sim compare`` asked for the
#: control against itself: 1.00 inside the simulated A/A band).
REFERENCES: tuple[str, ...] = ("null", "no change")


@dataclass(frozen=True)
class FigureScore:
    """One figure's interval scores: the prediction's and each reference's (by name, as
    :data:`REFERENCES`; a reference with no interval for the figure is absent)."""

    model: float
    references: Mapping[str, float]

    def skill(self, reference: str) -> float | None:
        """This figure's skill against ``reference`` (None: not scored against it)."""
        ref = self.references.get(reference)
        return None if ref is None else skill(self.model, ref)


def score_figure(
    pred: Prediction, observed: float, floor: float, no_change: Prediction | None
) -> FigureScore:
    """Score one figure's prediction and both references against the measured ratio: the
    null predictor's band is the measured A/A ``floor``; ``no_change`` is ``sim compare``'s
    own answer with the candidate equal to the control (None: it gave none)."""
    refs = {"null": interval_score(null_prediction(floor), observed)}
    if no_change is not None:
        refs["no change"] = interval_score(no_change, observed)
    return FigureScore(interval_score(pred, observed), refs)


@dataclass(frozen=True)
class SkillTotal:
    """Mean interval scores over a set of figures and the skill against each reference."""

    figures: int
    model: float
    references: Mapping[str, float]
    skills: Mapping[str, float]


def total_skill(scored: Sequence[FigureScore]) -> SkillTotal | None:
    """The mean score over ``scored`` and ``1 - mean / mean reference`` per reference, over
    the figures scored against that reference (the skill of the total, not a mean of the
    figures' skills: one figure with a near-zero reference score would swamp that). None
    for no figures."""
    if not scored:
        return None
    refs: dict[str, float] = {}
    skills: dict[str, float] = {}
    for name in REFERENCES:
        pairs = [(s.model, s.references[name]) for s in scored if name in s.references]
        if pairs:
            refs[name] = statistics.fmean(r for _, r in pairs)
            skills[name] = skill(statistics.fmean(m for m, _ in pairs), refs[name])
    return SkillTotal(len(scored), statistics.fmean(s.model for s in scored), refs, skills)
