"""Summary statistics of request and probe samples (definitions in ``docs/metrics.md``).

Latency percentiles are taken over *completed* requests only (a failed request has no
meaningful TPOT and would bias TTFT downwards); failures are counted separately. A completed
request whose stream carried no content chunk has no TTFT (and no TPOT): it is left out of
those percentiles and counted as ``no_ttft``, which every report shows. The
percentile and TPOT definitions are :mod:`tierctl.latency`'s, shared with the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tierctl.bench.probe import unhealthy_episodes
from tierctl.bench.samples import ProbeSample, RequestSample
from tierctl.latency import LatencySummary, percentile
from tierctl.quantity import Direction, Quantity, Unit

_LOWER, _HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER

#: Metrics of the A/B table, in report order: name -> what it measures. The unit is carried
#: here, never read from the name (``output_tok_per_s`` is a rate, not a duration).
METRICS: dict[str, Quantity] = {
    "ttft_p50_s": Quantity("TTFT p50", Unit.SECONDS, _LOWER),
    "ttft_p95_s": Quantity("TTFT p95", Unit.SECONDS, _LOWER),
    "ttft_p99_s": Quantity("TTFT p99", Unit.SECONDS, _LOWER),
    "tpot_p50_s": Quantity("TPOT p50", Unit.SECONDS, _LOWER),
    "tpot_p90_s": Quantity("TPOT p90", Unit.SECONDS, _LOWER),
    "itl_p50_s": Quantity("ITL p50", Unit.SECONDS, _LOWER),
    "itl_p90_s": Quantity("ITL p90", Unit.SECONDS, _LOWER),
    "e2e_p50_s": Quantity("E2E p50", Unit.SECONDS, _LOWER),
    "output_tok_per_s": Quantity("output tok/s", Unit.TOKENS_PER_SECOND, _HIGHER),
    "completion_pct": Quantity("completion %", Unit.PERCENT, _HIGHER),
    "errors": Quantity("errors", Unit.COUNT, _LOWER),
    "no_ttft": Quantity("no TTFT", Unit.COUNT, _LOWER),
    "probe_misses": Quantity("probe misses", Unit.COUNT, _LOWER),
}


@dataclass(frozen=True)
class BenchSummary(LatencySummary):
    """Headline numbers of a set of samples (one lane, one run, or pooled blocks).

    The headline latencies come from :class:`~tierctl.latency.LatencySummary`, over completed
    requests; the rest is what only a client sees (failures, inter-chunk gaps, probes).
    """

    sent: int
    no_ttft: int
    failed: int
    timed_out: int
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    e2e_p50_s: float | None
    queue_p99_s: float | None
    output_tokens: int
    span_s: float
    output_tok_per_s: float | None
    requests_per_s: float | None
    probes: int
    probe_misses: int
    probe_p50_s: float | None
    probe_p99_s: float | None
    probe_max_s: float | None
    unhealthy_episodes: int

    @property
    def completion_pct(self) -> float | None:
        """Completed as a percentage of sent."""
        return 100.0 * self.completed / self.sent if self.sent else None

    @property
    def errors(self) -> int:
        """Failed plus timed out."""
        return self.failed + self.timed_out

    def metric(self, name: str) -> float | None:
        """A metric of :data:`METRICS` by name."""
        value = getattr(self, name)
        return None if value is None else float(value)


def busy_span_s(requests: Sequence[RequestSample]) -> float:
    """From the first send to the last answer's end: the denominator of throughput.

    Not the run's wall time, so a lane's throughput is its own (a hammer lane that ends early
    is not diluted by a long burst beside it), and idle lead-in before the first send is not
    counted.
    """
    if not requests:
        return 0.0
    return max(r.sent_s + r.e2e_s for r in requests) - min(r.sent_s for r in requests)


def summarize_samples(
    requests: Sequence[RequestSample],
    probes: Sequence[ProbeSample] = (),
    *,
    misses_to_mark: int = 3,
) -> BenchSummary:
    """Summarise samples; probes may be empty (per-lane summaries carry none)."""
    done = [r for r in requests if r.outcome == "completed"]
    ttft = [r.ttft_s for r in done if r.ttft_s is not None]
    tpot = [t for t in (r.tpot_s for r in done) if t is not None]
    itl = [g for r in done for g in r.itl_s]
    probe_ok = [p.latency_s for p in probes if p.latency_s is not None]
    tokens = sum(r.output_tokens for r in done)
    span = busy_span_s(requests)
    return BenchSummary(
        **LatencySummary.fields_of(len(done), ttft, tpot),
        sent=len(requests),
        no_ttft=len(done) - len(ttft),
        failed=sum(1 for r in requests if r.outcome == "failed"),
        timed_out=sum(1 for r in requests if r.outcome == "timed_out"),
        ttft_p99_s=percentile(ttft, 99),
        itl_p50_s=percentile(itl, 50),
        itl_p90_s=percentile(itl, 90),
        e2e_p50_s=percentile([r.e2e_s for r in done], 50),
        queue_p99_s=percentile([r.queue_s for r in requests], 99),
        output_tokens=tokens,
        span_s=span,
        output_tok_per_s=tokens / span if span > 0 else None,
        requests_per_s=len(done) / span if span > 0 else None,
        probes=len(probes),
        probe_misses=sum(1 for p in probes if p.missed),
        probe_p50_s=percentile(probe_ok, 50),
        probe_p99_s=percentile(probe_ok, 99),
        probe_max_s=max(probe_ok) if probe_ok else None,
        unhealthy_episodes=len(unhealthy_episodes(probes, misses_to_mark)),
    )
