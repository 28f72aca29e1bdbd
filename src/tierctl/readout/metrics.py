"""What a readout compares, as PromQL over the engine's metric names (from its profile).

Latencies come from the engines' own histograms (``histogram_quantile`` over the rate of the
buckets in each step), so a readout judges what the engines served, not what one client saw.
Counts (requests, aborts) are pooled over the whole window and compared as proportions,
because per-step ratios of sparse counts are mostly 0/0.

A :class:`MetricDef` names what it reads by role (``ttft``, ``itl``, ``e2e``, a counter role);
the engine profile (:mod:`tierctl.engines`) turns the role into the engine's series name, so
one table serves every engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tierctl.engines import EngineProfile, MetricRef
from tierctl.quantity import Direction, Quantity, Unit

Kind = Literal["latency", "rate"]


@dataclass(frozen=True)
class MetricDef:
    """One compared quantity."""

    key: str  # short name in reports, e.g. ttft_p50
    title: str
    kind: Kind
    histogram: str | None = None  # histogram role: ttft, itl or e2e
    quantile: float | None = None
    counter: str | None = None  # counter role: generation_tokens, prompt_tokens
    guard: bool = False  # a regression here fails the canary even if the target improved

    @property
    def quantity(self) -> Quantity:
        """Unit and direction: latencies in seconds (lower is better), rates per second
        (higher is better)."""
        if self.kind == "latency":
            return Quantity(self.title, Unit.SECONDS, Direction.LOWER_IS_BETTER)
        return Quantity(self.title, Unit.TOKENS_PER_SECOND, Direction.HIGHER_IS_BETTER)

    def family(self, engine: EngineProfile) -> MetricRef:
        """The series family this quantity reads on ``engine`` (without prefix)."""
        m = engine.metrics
        if self.kind == "latency":
            base = {"ttft": m.ttft, "itl": m.itl, "e2e": m.e2e}[self.histogram or ""]
            return MetricRef(f"{base}_bucket")
        name = {"generation_tokens": m.generation_tokens, "prompt_tokens": m.prompt_tokens}
        return MetricRef(name[self.counter or ""])

    def expr(self, engine: EngineProfile, prefix: str, selector: str, window: str) -> str:
        """PromQL for one replica (``selector`` like ``container_name="x"``)."""
        sel = engine.selector(self.family(engine), prefix, selector)
        if self.kind == "latency":
            return f"histogram_quantile({self.quantile}, sum by (le) (rate({sel}[{window}])))"
        return f"sum(rate({sel}[{window}]))"


# The field report's table: TTFT p50/p95, TPOT p50/p90 (the engines' inter-token latency),
# E2E, throughput.
DEFAULT_METRICS: tuple[MetricDef, ...] = (
    MetricDef("ttft_p50", "TTFT p50", "latency", "ttft", 0.5, guard=True),
    MetricDef("ttft_p95", "TTFT p95", "latency", "ttft", 0.95, guard=True),
    MetricDef("tpot_p50", "TPOT p50", "latency", "itl", 0.5),
    MetricDef("tpot_p90", "TPOT p90", "latency", "itl", 0.9),
    MetricDef("e2e_p50", "E2E p50", "latency", "e2e", 0.5, guard=True),
    MetricDef("gen_tokens_per_s", "generation tok/s", "rate", counter="generation_tokens"),
)
