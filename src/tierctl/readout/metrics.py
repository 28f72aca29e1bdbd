"""What a readout compares, as PromQL over SGLang's metric names.

Latencies come from the engines' own histograms (``histogram_quantile`` over the rate of the
buckets in each step), so a readout judges what the engines served, not what one client saw.
Counts (requests, aborts) are pooled over the whole window and compared as proportions,
because per-step ratios of sparse counts are mostly 0/0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["latency", "rate"]


@dataclass(frozen=True)
class MetricDef:
    """One compared quantity."""

    key: str  # short name in reports, e.g. ttft_p50
    title: str
    kind: Kind
    histogram: str | None = None  # histogram base name without prefix, for latencies
    quantile: float | None = None
    counter: str | None = None  # counter name without prefix, for rates
    guard: bool = False  # a regression here fails the canary even if the target improved

    def expr(self, prefix: str, selector: str, window: str) -> str:
        """PromQL for one replica (``selector`` like ``container_name="x"``)."""
        if self.kind == "latency":
            return (
                f"histogram_quantile({self.quantile}, sum by (le) "
                f'(rate({{__name__="{prefix}{self.histogram}_bucket",{selector}}}[{window}])))'
            )
        return f'sum(rate({{__name__="{prefix}{self.counter}",{selector}}}[{window}]))'


# The field report's table: TTFT p50/p95, TPOT p50/p90 (SGLang's inter-token latency), E2E,
# throughput. The quoted __name__ form keeps `sglang:` names valid in any PromQL position.
DEFAULT_METRICS: tuple[MetricDef, ...] = (
    MetricDef("ttft_p50", "TTFT p50", "latency", "time_to_first_token_seconds", 0.5, guard=True),
    MetricDef("ttft_p95", "TTFT p95", "latency", "time_to_first_token_seconds", 0.95, guard=True),
    MetricDef("tpot_p50", "TPOT p50", "latency", "inter_token_latency_seconds", 0.5),
    MetricDef("tpot_p90", "TPOT p90", "latency", "inter_token_latency_seconds", 0.9),
    MetricDef("e2e_p50", "E2E p50", "latency", "e2e_request_latency_seconds", 0.5, guard=True),
    MetricDef("gen_tokens_per_s", "generation tok/s", "rate", counter="generation_tokens_total"),
)

REQUESTS_COUNTER = "e2e_request_latency_seconds_count"
ABORTS_COUNTER = "num_aborted_requests_total"
PREFIXES = ("sglang:", "sglang_")


def detect_prefix(names: set[str]) -> str:
    """``sglang:`` as the engine exports, or ``sglang_`` where a pipeline rewrote it."""
    for prefix in PREFIXES:
        if f"{prefix}{REQUESTS_COUNTER}" in names:
            return prefix
    return PREFIXES[0]
