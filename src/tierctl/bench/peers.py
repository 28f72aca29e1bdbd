"""TPOT and ITL as each peer benchmark client defines them, computed from tierctl's samples.

"TPOT 42 ms" from two tools need not be the same quantity. The definitions below were read
from each tool's own source (recorded in ``docs/metrics.md``, with the files they come from);
every one is computed here from the same request samples, so a run's table shows what each
tool *would* have reported for the same traffic, side by side.

Times per request, from the sample: ``ttft`` (send to first content chunk), ``last`` (send to
the last content chunk: ``ttft + sum(itl)``), ``e2e`` (send to the end of the stream) and
``out`` (output tokens, from the server's usage). ``gaps`` are the inter-chunk gaps.

* **tierctl**: TPOT ``(e2e - ttft) / (out - 1)`` per request; ITL the pooled gaps.
* **vllm bench serve** and **sglang.bench_serving**: the same TPOT (their ``latency`` is the
  time of the stream's last chunk); ITL the gaps pooled over requests, so requests with many
  chunks weigh more and a chunk carrying several tokens counts as one gap.
* **guidellm**: ``time_per_output_token_ms`` is ``(last - start) / out`` -- the first token's
  wait (TTFT, i.e. prefill) is *included*, so a long prompt inflates it; ITL
  (``inter_token_latency_ms``) is ``(last - ttft) / (out - 1)`` per request, which is what the
  others call TPOT.
* **AIPerf**: ``inter_token_latency`` is ``(request_latency - ttft) / (out - 1)`` per request
  (tierctl's TPOT under another name); it reports no TPOT of its own. Its inter-chunk latency
  (``ICL``) is each request's mean gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tierctl.bench.samples import RequestSample
from tierctl.latency import percentile


@dataclass(frozen=True)
class PeerMetric:
    """One tool's TPOT or ITL over a set of requests.

    Attributes:
        tool: the tool whose definition this is.
        metric: the tool's own name for it.
        kind: ``tpot`` or ``itl`` (what tierctl would call the quantity's role).
        formula: the definition, in the terms of the module docstring.
        per: ``request`` (one value per request) or ``gap`` (pooled inter-chunk gaps).
        p50_s: median over the values.
        p90_s: 90th percentile over the values.
        n: how many values.
    """

    tool: str
    metric: str
    kind: str
    formula: str
    per: str
    p50_s: float | None
    p90_s: float | None
    n: int


def _last(r: RequestSample) -> float | None:
    return None if r.ttft_s is None else r.ttft_s + sum(r.itl_s)


def _per_request(
    done: Sequence[RequestSample], value: Callable[[RequestSample], float | None]
) -> list[float]:
    return [v for v in (value(r) for r in done) if v is not None]


def _e2e_tpot(r: RequestSample) -> float | None:
    if r.ttft_s is None or r.output_tokens < 2:
        return None
    return (r.e2e_s - r.ttft_s) / (r.output_tokens - 1)


def _guidellm_tpot(r: RequestSample) -> float | None:
    last = _last(r)
    if last is None or r.output_tokens < 1:
        return None
    return last / r.output_tokens


def _guidellm_itl(r: RequestSample) -> float | None:
    last = _last(r)
    if last is None or r.ttft_s is None or r.output_tokens < 2:
        return None
    return (last - r.ttft_s) / (r.output_tokens - 1)


def _mean_gap(r: RequestSample) -> float | None:
    return sum(r.itl_s) / len(r.itl_s) if r.itl_s else None


#: (tool, metric name, kind, formula, per, per-request function or None for pooled gaps).
DEFINITIONS: tuple[
    tuple[str, str, str, str, str, Callable[[RequestSample], float | None] | None], ...
] = (
    ("tierctl", "TPOT", "tpot", "(e2e - ttft) / (out - 1)", "request", _e2e_tpot),
    ("tierctl", "ITL", "itl", "inter-chunk gaps, pooled", "gap", None),
    ("vllm bench serve", "TPOT", "tpot", "(latency - ttft) / (out - 1)", "request", _e2e_tpot),
    ("vllm bench serve", "ITL", "itl", "inter-chunk gaps, pooled", "gap", None),
    ("sglang.bench_serving", "TPOT", "tpot", "(latency - ttft) / (out - 1)", "request", _e2e_tpot),
    ("sglang.bench_serving", "ITL", "itl", "inter-chunk gaps, pooled", "gap", None),
    (
        "guidellm",
        "time_per_output_token_ms",
        "tpot",
        "(last token - start) / out  (includes TTFT)",
        "request",
        _guidellm_tpot,
    ),
    (
        "guidellm",
        "inter_token_latency_ms",
        "itl",
        "(last token - first token) / (out - 1)",
        "request",
        _guidellm_itl,
    ),
    (
        "AIPerf",
        "inter_token_latency",
        "itl",
        "(request_latency - ttft) / (out - 1)",
        "request",
        _e2e_tpot,
    ),
    ("AIPerf", "inter_chunk_latency", "itl", "mean gap per request", "request", _mean_gap),
)


def peer_metrics(requests: Sequence[RequestSample]) -> list[PeerMetric]:
    """Every definition of :data:`DEFINITIONS` over the completed requests."""
    done = [r for r in requests if r.outcome == "completed"]
    gaps = [g for r in done for g in r.itl_s]
    out: list[PeerMetric] = []
    for tool, metric, kind, formula, per, fn in DEFINITIONS:
        values = gaps if fn is None else _per_request(done, fn)
        out.append(
            PeerMetric(
                tool=tool,
                metric=metric,
                kind=kind,
                formula=formula,
                per=per,
                p50_s=percentile(values, 50),
                p90_s=percentile(values, 90),
                n=len(values),
            )
        )
    return out
