"""Summary statistics of request and probe samples (definitions in ``docs/metrics.md``).

Latency percentiles are taken over *completed* requests only (a failed request has no
meaningful TPOT and would bias TTFT downwards); failures are counted separately. Percentiles
use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tierctl.bench.probe import unhealthy_episodes
from tierctl.bench.samples import ProbeSample, RequestSample

#: Metrics of the A/B table, in report order: name -> (label, lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "ttft_p50_s": ("TTFT p50", True),
    "ttft_p95_s": ("TTFT p95", True),
    "tpot_p50_s": ("TPOT p50", True),
    "tpot_p90_s": ("TPOT p90", True),
    "itl_p90_s": ("ITL p90", True),
    "e2e_p50_s": ("E2E p50", True),
    "completion_pct": ("completion %", False),
    "errors": ("errors", True),
    "probe_misses": ("probe misses", True),
}


@dataclass(frozen=True)
class Summary:
    """Headline numbers of a set of samples (one lane, one run, or pooled blocks)."""

    sent: int
    completed: int
    failed: int
    timed_out: int
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    itl_p90_s: float | None
    e2e_p50_s: float | None
    queue_p99_s: float | None
    output_tokens: int
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


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (0-100), or ``None`` for no values."""
    arr = np.asarray(values, dtype=float)
    return float(np.percentile(arr, q)) if arr.size else None


def summarize(
    requests: Sequence[RequestSample],
    probes: Sequence[ProbeSample] = (),
    *,
    misses_to_mark: int = 3,
) -> Summary:
    """Summarise samples; probes may be empty (per-lane summaries carry none)."""
    done = [r for r in requests if r.outcome == "completed"]
    ttft = [r.ttft_s for r in done if r.ttft_s is not None]
    tpot = [t for t in (r.tpot_s for r in done) if t is not None]
    itl = [g for r in done for g in r.itl_s]
    probe_ok = [p.latency_s for p in probes if p.latency_s is not None]
    return Summary(
        sent=len(requests),
        completed=len(done),
        failed=sum(1 for r in requests if r.outcome == "failed"),
        timed_out=sum(1 for r in requests if r.outcome == "timed_out"),
        ttft_p50_s=percentile(ttft, 50),
        ttft_p95_s=percentile(ttft, 95),
        tpot_p50_s=percentile(tpot, 50),
        tpot_p90_s=percentile(tpot, 90),
        itl_p90_s=percentile(itl, 90),
        e2e_p50_s=percentile([r.e2e_s for r in done], 50),
        queue_p99_s=percentile([r.queue_s for r in requests], 99),
        output_tokens=sum(r.output_tokens for r in done),
        probes=len(probes),
        probe_misses=sum(1 for p in probes if p.missed),
        probe_p50_s=percentile(probe_ok, 50),
        probe_p99_s=percentile(probe_ok, 99),
        probe_max_s=max(probe_ok) if probe_ok else None,
        unhealthy_episodes=len(unhealthy_episodes(probes, misses_to_mark)),
    )


def lane_filter(lane: str | None) -> Callable[[RequestSample], bool]:
    """Predicate selecting one lane's samples (``None`` = all lanes)."""
    if lane is None:
        return lambda _r: True
    return lambda r: r.lane == lane
