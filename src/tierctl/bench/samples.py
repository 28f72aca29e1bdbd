"""Runtime records of one load run: request samples, probe samples, and their outcomes.

Every request the client *sent* ends as exactly one :class:`RequestSample` whose ``outcome``
is ``completed``, ``failed`` or ``timed_out``; so ``sent = completed + failed + timed_out``
holds by construction, including for requests cut short by Ctrl-C (outcome ``failed``, error
class ``interrupted``). Times are seconds on the monotonic clock, relative to the run start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tierctl.bench.clientcheck import ClientCheck

from tierctl.latency import tpot_s

Outcome = Literal["completed", "failed", "timed_out"]

#: Error classes, one per way a request can go wrong (``None`` when it completed).
ERROR_CLASSES = (
    "http_status",  # the server answered with a non-2xx status
    "stream_error",  # an error object inside the SSE stream
    "malformed_stream",  # bytes that are not the OpenAI SSE protocol
    "connection",  # refused, reset or closed before the stream ended
    "timeout",  # no complete answer within the request timeout
    "interrupted",  # the run was stopped (Ctrl-C) while the request was in flight
)


@dataclass(frozen=True)
class RequestSample:
    """One sent request and what came back.

    Attributes:
        index: position of the request in the run's plan (stable across A/B arms).
        lane: name of the workload lane that issued it.
        scheduled_s: when the plan wanted it sent, from run start.
        sent_s: when the client started sending it, from run start.
        queue_s: client-side wait before sending (pacing lag or a full concurrency cap).
        ttft_s: send to first content chunk; ``None`` when none arrived.
        e2e_s: send to the end of the stream or the failure.
        itl_s: every gap between consecutive content chunks, in order.
        input_tokens: prompt tokens (from usage, else the planned count).
        output_tokens: generated tokens (from usage, else the content chunks counted).
        planned_input_tokens: prompt tokens the plan asked for.
        outcome: ``completed``, ``failed`` or ``timed_out``.
        error_class: one of :data:`ERROR_CLASSES`, or ``None``.
        http_status: the response status, ``None`` when no response line arrived.
        error: a short human-readable detail of the failure.
    """

    index: int
    lane: str
    scheduled_s: float
    sent_s: float
    queue_s: float
    ttft_s: float | None
    e2e_s: float
    itl_s: tuple[float, ...]
    input_tokens: int
    output_tokens: int
    planned_input_tokens: int
    outcome: Outcome
    error_class: str | None = None
    http_status: int | None = None
    error: str | None = None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (E2E - TTFT) / (output tokens - 1).

        :func:`tierctl.latency.tpot_s`'s definition; ``None`` unless the request completed.
        """
        if self.outcome != "completed" or self.ttft_s is None:
            return None
        return tpot_s(self.ttft_s, self.e2e_s, self.output_tokens)


@dataclass(frozen=True)
class ProbeSample:
    """One liveness probe: when it was sent and how long the answer took.

    ``latency_s`` is ``None`` for a miss (timeout, connection error or non-2xx status).
    """

    sent_s: float
    latency_s: float | None
    status: int | None
    error: str | None = None

    @property
    def missed(self) -> bool:
        """Whether a proxy would count this probe as failed."""
        return self.latency_s is None


@dataclass(frozen=True)
class RunRecord:
    """Everything one run against one endpoint produced.

    Attributes:
        url: the endpoint's base URL.
        label: the arm or run label (``A``, ``B`` or ``run``).
        started_at: wall-clock start, ISO 8601 UTC.
        duration_s: wall time of the run.
        requests: one sample per sent request, in send order.
        probes: one sample per probe, in send order.
        planned: how many requests the plan held.
        interrupted: whether the run was stopped before the plan finished.
        client_cpu_s: CPU time the client process used during the run.
        warnings: reasons the numbers may be unreliable (client CPU, pacing lag).
        client: the client-bottleneck check of the run (``None``: not measured).
    """

    url: str
    label: str
    started_at: str
    duration_s: float
    requests: tuple[RequestSample, ...]
    probes: tuple[ProbeSample, ...]
    planned: int
    interrupted: bool = False
    client_cpu_s: float = 0.0
    warnings: tuple[str, ...] = field(default_factory=tuple)
    client: ClientCheck | None = None

    @property
    def client_bound(self) -> bool:
        """Whether the client's own limits may have shaped this run's numbers."""
        return self.client is not None and self.client.client_bound

    @property
    def sent(self) -> int:
        """Requests the client started sending."""
        return len(self.requests)

    def count(self, outcome: Outcome) -> int:
        """How many requests ended with ``outcome``."""
        return sum(1 for r in self.requests if r.outcome == outcome)
