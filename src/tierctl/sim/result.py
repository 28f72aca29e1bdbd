"""Results of a simulation: per-request figures, summary percentiles and the A/B ratio table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tierctl.latency import LatencySummary, percentile, tpot_s
from tierctl.sim.engine import Live


@dataclass(frozen=True)
class RequestResult:
    """One request's outcome. Times in seconds; ``None`` where it does not apply.

    ``tpot_s`` excludes the first token: ``(finish - first_token) / (tokens - 1)``.
    """

    rid: str
    arrival_s: float
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    status: str  # completed | aborted | rejected | unfinished
    queue_s: float | None
    kv_wait_s: float
    ttft_s: float | None
    tpot_s: float | None
    itl_max_s: float | None
    e2e_s: float | None
    # Mean gap between this request's tokens while a prefill was in progress or ran in the
    # gap: its decode speed during a burst, which a whole-request mean dilutes.
    burst_itl_mean_s: float | None = None
    burst_gaps: int = 0
    # Tokens produced in those gaps over their time: the decode speed during a burst
    # (speculative rounds deliver several tokens per gap).
    burst_decode_tok_s: float | None = None
    preemptions: int = 0
    #: Why it did not complete ("" when it did): refused (too long), aborted (queue full, the
    #: client), or unfinished when the simulation ended.
    reason: str = ""

    @staticmethod
    def of(live: Live) -> RequestResult:
        """Freeze a scheduler's request state."""
        r = live.req
        first = live.first_token_s
        fin = live.finished_s if live.status == "completed" else None
        tpot = None
        if fin is not None and first is not None:
            tpot = tpot_s(first, fin, live.generated)
        return RequestResult(
            rid=r.rid,
            arrival_s=r.arrival_s,
            input_tokens=r.input_tokens,
            cached_tokens=live.cached_tokens,
            output_tokens=live.generated,
            status=live.status
            if live.status in ("completed", "aborted", "rejected")
            else "unfinished",
            queue_s=None if live.admitted_s is None else live.admitted_s - live.enqueued_s,
            kv_wait_s=live.kv_wait_s,
            ttft_s=None if first is None else first - live.enqueued_s,
            tpot_s=tpot,
            itl_max_s=live.itl_max_s if live.generated > 1 else None,
            e2e_s=None if fin is None else fin - live.enqueued_s,
            burst_itl_mean_s=live.burst_gap_sum_s / live.burst_gaps if live.burst_gaps else None,
            burst_gaps=live.burst_gaps,
            burst_decode_tok_s=live.burst_tokens / live.burst_gap_sum_s
            if live.burst_gap_sum_s > 0
            else None,
            preemptions=live.preemptions,
            reason=_reason(live),
        )


def _reason(live: Live) -> str:
    """Why a request did not complete ("" when it did)."""
    if live.status == "completed":
        return ""
    if live.status not in ("aborted", "rejected"):
        return "unfinished when the simulation ended"
    return live.reason or live.status


@dataclass(frozen=True)
class DecodeRates:
    """Per-request decode rates, ``(tokens - 1) / (e2e - TTFT)`` (tok/s), three ways: the
    mean over requests (the last of a burst, decoding alone, dominates it), the median, and
    pooled (all requests' tokens over all their decode time). sglang PR #40443's
    "per-request decode tok/s" (1.38 / 18.45 / 32.05 at interval 0 / 4 / 8) is read as the
    median or pooled figure: a mean would be at least the lone last request's rate / 8."""

    mean: float | None
    median: float | None
    pooled: float | None
    requests: int


def decode_rates(requests: Sequence[RequestResult]) -> DecodeRates:
    """:class:`DecodeRates` of the completed requests with more than one token."""
    import statistics

    spans = [
        (r.output_tokens - 1, r.e2e_s - r.ttft_s)
        for r in requests
        if r.status == "completed"
        and r.output_tokens > 1
        and r.ttft_s is not None
        and r.e2e_s is not None
        and r.e2e_s > r.ttft_s
    ]
    if not spans:
        return DecodeRates(None, None, None, 0)
    rates = [n / t for n, t in spans]
    pooled = sum(n for n, _ in spans) / sum(t for _, t in spans)
    return DecodeRates(statistics.mean(rates), statistics.median(rates), pooled, len(spans))


def not_completed(requests: Sequence[RequestResult]) -> dict[str, int]:
    """How many requests did not complete, by reason, most first: what a completion below 1
    consists of (e.g. ``{"prompt + output exceed the context (max-model-len 4096)": 8}``)."""
    counts = Counter(r.reason for r in requests if r.status != "completed")
    return dict(counts.most_common())


@dataclass(frozen=True)
class SimSummary(LatencySummary):
    """Summary percentiles over the requests of one simulated run.

    The headline latencies come from :class:`~tierctl.latency.LatencySummary` (TTFT over
    every request that got a first token, TPOT over completed ones); the rest is what only
    the simulator sees (queue and KV waits, the cached fraction of prompts).
    """

    requests: int
    aborted: int
    completion: float
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    queue_p50_s: float | None
    queue_p95_s: float | None
    kv_waits: int
    cached_fraction: float
    # Starvation: the longest gap between two tokens of any request (a p99 ITL of 34 ms can
    # hide one 133 s stall), and the mean inter-token gap of decoding requests while prompts
    # were being prefilled.
    stall_max_s: float | None = None
    burst_itl_mean_s: float | None = None
    burst_itl_max_mean_s: float | None = None
    preemptions: int = 0
    # Host side: health probes answered while the event loop tokenized (tierctl.sim.host).
    probes: int = 0
    probe_p99_s: float | None = None
    probe_max_s: float | None = None
    probe_misses: int = 0
    unhealthy_flips: int = 0


@dataclass(frozen=True)
class SimResult:
    """Everything one simulation produced."""

    workload: str
    preset: str
    argv: tuple[str, ...]
    requests: tuple[RequestResult, ...]
    summary: SimSummary
    rounds: int
    prefill_rounds: int
    deferred_rounds: int
    sim_end_s: float
    # Why the simulation stopped before the workload was done ("" when it was): a bound hit,
    # or a scheduler that could schedule nothing more (never a hang).
    stopped: str = ""
    # The largest step shapes the run produced (sim.domain.StepDomain's fields).
    domain: dict[str, int] = field(default_factory=dict)
    # A disaggregated arm's hand-off figures (tierctl.sim.disagg: pools, transfers, their
    # waits); empty for one replica.
    handoff: dict[str, Any] = field(default_factory=dict)

    def subset(self, prefix: str) -> SimSummary:
        """The summary over the requests whose id starts with ``prefix``."""
        return summarize_results([r for r in self.requests if r.rid.startswith(prefix)], 0, None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def summarize_results(
    reqs: list[RequestResult], kv_waits: int, itl: tuple[float, float] | None
) -> SimSummary:
    """Summary percentiles of ``reqs``; ITL percentiles come from the scheduler's histogram."""
    done = [r for r in reqs if r.status == "completed"]
    ttft = [r.ttft_s for r in reqs if r.ttft_s is not None]
    tpot = [r.tpot_s for r in done if r.tpot_s is not None]
    queue = [r.queue_s for r in reqs if r.queue_s is not None]
    prompt = sum(r.input_tokens for r in reqs if r.queue_s is not None)
    cached = sum(r.cached_tokens for r in reqs if r.queue_s is not None)
    if itl is None:
        itl_vals = [r.itl_max_s for r in done if r.itl_max_s is not None]
        itl = (percentile(itl_vals, 50) or 0.0, percentile(itl_vals, 99) or 0.0)
    return SimSummary(
        **LatencySummary.fields_of(len(done), ttft, tpot),
        requests=len(reqs),
        aborted=sum(r.status in ("aborted", "rejected") for r in reqs),
        completion=len(done) / len(reqs) if reqs else 0.0,
        ttft_p99_s=percentile(ttft, 99),
        tpot_p99_s=percentile(tpot, 99),
        itl_p50_s=itl[0],
        itl_p99_s=itl[1],
        queue_p50_s=percentile(queue, 50),
        queue_p95_s=percentile(queue, 95),
        kv_waits=kv_waits,
        cached_fraction=cached / prompt if prompt else 0.0,
        **_starvation(reqs),
    )


def _starvation(reqs: list[RequestResult]) -> dict[str, Any]:
    stalls = [r.itl_max_s for r in reqs if r.itl_max_s is not None]
    gaps = sum(r.burst_gaps for r in reqs)
    total = sum((r.burst_itl_mean_s or 0.0) * r.burst_gaps for r in reqs)
    per_req = [r.burst_itl_mean_s for r in reqs if r.burst_itl_mean_s is not None]
    return {
        "stall_max_s": max(stalls) if stalls else None,
        "burst_itl_mean_s": total / gaps if gaps else None,
        "burst_itl_max_mean_s": max(per_req) if per_req else None,
        "preemptions": sum(r.preemptions for r in reqs),
    }


@dataclass(frozen=True)
class RatioRow:
    """One row of the A/B table: the metric, both values and candidate/control."""

    metric: str
    control: float | None
    candidate: float | None
    ratio: float | None


COMPARE_METRICS = (
    ("TTFT p50", "ttft_p50_s"),
    ("TTFT p95", "ttft_p95_s"),
    ("TPOT p50", "tpot_p50_s"),
    ("TPOT p90", "tpot_p90_s"),
    ("stall max", "stall_max_s"),
    ("burst ITL", "burst_itl_mean_s"),
    ("completion", "completion"),
)


def ratio_table(control: SimSummary, candidate: SimSummary) -> tuple[RatioRow, ...]:
    """The field report's table: candidate / control for TTFT, TPOT and completion."""
    rows = []
    for label, attr in COMPARE_METRICS:
        a, b = getattr(control, attr), getattr(candidate, attr)
        ratio = b / a if a and b is not None else None
        rows.append(RatioRow(label, a, b, ratio))
    return tuple(rows)
