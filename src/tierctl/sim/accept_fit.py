"""Speculative decoding's acceptance, fitted from the engine's own counters.

The simulator draws each verify round's accepted drafts as a chain: draft position ``k`` is
accepted with probability ``c_k`` when every position before it was (``CostModel``'s
``spec_accept_by_position``; ``spec_accept_rate`` for positions past those). What each engine
exports, named in its profile (``metrics.extra``):

* **vLLM** (``vllm/v1/spec_decode/metrics.py``): counters of verify rounds (``num_drafts``),
  draft tokens proposed and accepted, and accepted tokens per draft position (label
  ``position``). Position ``k``'s count over the rounds is ``P(accepted > k)``, so the whole
  acceptance-length distribution is read, and ``c_k = a_k / a_{k-1}`` (``c_0 = a_0 / D``).
* **SGLang** (``observability/metrics_collector.py``): gauges of the last batches' mean
  acceptance length (accepted drafts plus the bonus token per verify) and rate. Only the mean
  is exported, so the shape is assumed: one rate ``r`` for every position, solved from
  ``1 + r + r^2 + ... + r^S = mean`` with ``S`` the draft steps of the argv. A gauge is the
  most recent batches' figure, not a run's total: dump it at the end of a steady run.

Both fits also give the single chain rate with the same mean length (``spec_accept_rate``),
so a cost model fitted on one engine still means the same tokens per round on the other.
Counters are totals since the engine started: a ``baseline`` dump taken before the run is
subtracted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tierctl.engines import profile_for
from tierctl.errors import InputError, Location
from tierctl.runtime.promtext import Sample, metric_total, parse_metrics
from tierctl.sim.cost import CostModel


@dataclass(frozen=True)
class AcceptanceFit:
    """Acceptance fitted from one engine's counters.

    Attributes:
        engine: whose counters.
        by_position: the conditional acceptance of each draft position (empty: only a mean
            was exported, and ``rate`` stands for every position).
        rate: the one chain rate with the same mean length.
        mean_length: tokens per verify round, the bonus token included.
        distribution: ``P(accepted drafts = k)`` for k = 0..positions (empty without
            per-position counters).
        counters: what was read (after the baseline), for the provenance.
        method: how, in words.
    """

    engine: str
    by_position: tuple[float, ...]
    rate: float
    mean_length: float
    distribution: tuple[float, ...]
    counters: dict[str, Any]
    method: str

    def provenance(self, source: str) -> dict[str, Any]:
        """The cost model file's ``provenance.acceptance`` entry."""
        return {
            "source": source,
            "engine": self.engine,
            "method": self.method,
            "mean_length": self.mean_length,
            "rate": self.rate,
            "by_position": list(self.by_position),
            "distribution": list(self.distribution),
            "counters": self.counters,
        }


def chain_rate(mean_length: float, steps: int) -> float:
    """The rate ``r`` with ``1 + r + ... + r^steps == mean_length`` (clamped to [0, 1])."""
    target = mean_length - 1.0
    if steps <= 0 or target <= 0:
        return 0.0
    if target >= steps:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**j for j in range(1, steps + 1)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _no_counters(engine: str, source: str, names: list[str]) -> InputError:
    return InputError(
        f"no {engine} speculative decoding counters in {source}",
        location=Location(file=source),
        rule="the metrics hold " + ", ".join(names),
        fix="dump the engine's /metrics after a run with speculative decoding on "
        "(SGLang: --enable-metrics)",
    )


def _per_position(samples: list[Sample], name: str, label: str) -> dict[int, float]:
    names = {name, name.replace(":", "_")}
    out: dict[int, float] = {}
    for s in samples:
        if s.name in names and s.labels.get(label, "").isdigit():
            k = int(s.labels[label])
            out[k] = out.get(k, 0.0) + s.value
    return out


def _fit_vllm(
    now: list[Sample], before: list[Sample], source: str, steps: int = 0
) -> AcceptanceFit:
    prof = profile_for("vllm")
    ex = prof.metrics.extra
    names = [prof.prefix + ex[k] for k in ("spec_drafts", "spec_accepted_per_position")]

    def total(samples: list[Sample], key: str) -> float:
        return metric_total(samples, prof.prefix + ex[key]) or 0.0

    drafts = total(now, "spec_drafts") - total(before, "spec_drafts")
    per_now = _per_position(now, names[1], prof.spec_position_label)
    per_before = _per_position(before, names[1], prof.spec_position_label)
    accepted = [per_now[k] - per_before.get(k, 0.0) for k in sorted(per_now)]
    if drafts <= 0 or not accepted or sorted(per_now) != list(range(len(per_now))):
        raise _no_counters("vLLM", source, names)
    # A position no round ever accepted may not be exported: it accepted nothing.
    accepted += [0.0] * max(0, steps - len(accepted))
    # Counters of one chain never rise with the position; clamp what noise a torn dump left.
    probs: list[float] = []
    for a in accepted:
        p = min(max(a / drafts, 0.0), probs[-1] if probs else 1.0)
        probs.append(p)
    cond = tuple(
        (p / prev if prev > 0 else 0.0) for p, prev in zip(probs, [1.0, *probs[:-1]], strict=True)
    )
    dist = tuple(
        (1.0 if k == 0 else probs[k - 1]) - (probs[k] if k < len(probs) else 0.0)
        for k in range(len(probs) + 1)
    )
    mean = 1.0 + sum(probs)
    counters = {
        "drafts": drafts,
        "draft_tokens": total(now, "spec_draft_tokens") - total(before, "spec_draft_tokens"),
        "accepted_tokens": total(now, "spec_accepted_tokens")
        - total(before, "spec_accepted_tokens"),
        "accepted_per_position": accepted,
    }
    return AcceptanceFit(
        "vllm",
        cond,
        chain_rate(mean, len(probs)),
        mean,
        dist,
        counters,
        "vLLM per-position accepted-token counters over verify rounds (the whole "
        "acceptance-length distribution)",
    )


def _fit_sglang(now: list[Sample], source: str, steps: int) -> AcceptanceFit:
    prof = profile_for("sglang")
    ex = prof.metrics.extra
    name = prof.prefix + ex["spec_accept_length"]
    values = [s.value for s in now if s.name in {name, name.replace(":", "_")}]
    if not values:
        raise _no_counters("SGLang", source, [name])
    mean = sum(values) / len(values)  # one gauge per rank: their mean
    rate_gauge = metric_total(now, prof.prefix + ex["spec_accept_rate"])
    rate = chain_rate(mean, steps)
    return AcceptanceFit(
        "sglang",
        (),
        rate,
        mean,
        (),
        {"accept_length": mean, "accept_rate_gauge": rate_gauge, "draft_steps": steps},
        f"SGLang's mean acceptance length gauge; the shape assumed a chain with one rate "
        f"over {steps} draft steps",
    )


def fit_acceptance(
    text: str,
    engine: str,
    *,
    draft_steps: int,
    baseline: str | None = None,
    source: str = "metrics",
) -> AcceptanceFit:
    """Fit the acceptance from a ``/metrics`` text (minus a ``baseline`` text's counters).

    Args:
        text: the Prometheus text after the run.
        engine: ``vllm`` or ``sglang``.
        draft_steps: the draft tokens per round of the measured argv (SGLang: its shape).
        baseline: the text before the run (vLLM's counters are subtracted).
        source: where the text came from, for messages.

    Raises:
        InputError: the text holds none of the engine's speculative counters.
    """
    now = parse_metrics(text)
    if engine == "vllm":
        return _fit_vllm(now, parse_metrics(baseline or ""), source, draft_steps)
    return _fit_sglang(now, source, draft_steps)


def apply_acceptance(model: CostModel, fit: AcceptanceFit) -> CostModel:
    """``model`` with the fitted acceptance (the other speculative terms kept)."""
    return dataclasses.replace(
        model, spec_accept_rate=fit.rate, spec_accept_by_position=fit.by_position
    )


def draft_steps_of(config: Any) -> int:
    """The draft tokens per verify round of a measured engine's argv (0: speculative decoding
    is off in it)."""
    spec = config.speculative
    return int(spec[0]) if spec else 0


def acceptance_from(
    source: str,
    model: CostModel,
    config: Any,
    *,
    baseline: str | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """``model`` with the acceptance fitted from ``source`` (a ``/metrics`` dump or URL), and
    the provenance entry; ``config`` is the measured engine's (its engine and draft steps).

    Raises:
        InputError: the source cannot be read, holds no speculative counters, or the argv
            has speculative decoding off (there is nothing to fit).
    """
    from tierctl.runtime.metrics_source import read_metrics_text

    steps = draft_steps_of(config)
    if steps <= 0:
        raise InputError(
            "the engine argv has speculative decoding off: no acceptance to fit",
            location=Location(file="argv"),
            rule="fitting acceptance needs the measured engine's speculative argv",
            fix="give the argv after `--` (SGLang --speculative-algorithm ..., vLLM "
            "--speculative-config ...)",
        )
    text = read_metrics_text(source)
    before = read_metrics_text(baseline) if baseline else None
    fit = fit_acceptance(text, config.engine, draft_steps=steps, baseline=before, source=source)
    return apply_acceptance(model, fit), fit.provenance(source)
