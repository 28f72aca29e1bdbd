"""Request latency figures, defined once for the simulator and the load client.

``tierctl sim`` (:mod:`tierctl.sim.result`) and ``tierctl bench`` (:mod:`tierctl.bench.summary`)
report the same headline numbers, so an A/B ratio from a simulation and one from a load test
mean the same thing. This module owns their definitions (``docs/metrics.md`` states them):

- :func:`percentile`: linear interpolation between order statistics (numpy's default method);
- :func:`tpot_s`: time per output token *excluding the first*,
  ``(last token - first token) / (output tokens - 1)``;
- :class:`LatencySummary`: the headline latency percentiles both summaries carry
  (TTFT p50/p95, TPOT p50/p90) and the count of completed requests they are taken over.

It imports neither ``sim`` nor ``bench``; both import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (``q`` in 0..100) of ``values``, or ``None`` for no values.

    Linear interpolation between the two nearest order statistics, as numpy's default
    ``method="linear"`` (and most serving benchmarks) compute it.
    """
    import numpy as np  # the sim and bench extras both carry numpy; the base install does not

    arr = np.asarray(values, dtype=float)
    return float(np.percentile(arr, q)) if arr.size else None


def tpot_s(first_token_s: float, last_token_s: float, output_tokens: int) -> float | None:
    """Time per output token after the first: ``(last - first) / (output_tokens - 1)``.

    The first token is excluded because its latency is TTFT (prefill), not decode. ``None``
    for fewer than two tokens, where no decode interval exists. Both times on one clock.
    """
    if output_tokens < 2:
        return None
    return (last_token_s - first_token_s) / (output_tokens - 1)


@dataclass(frozen=True)
class LatencySummary:
    """The headline latency percentiles over one set of requests.

    The simulator's :class:`~tierctl.sim.result.SimSummary` and the load client's
    :class:`~tierctl.bench.summary.BenchSummary` extend it with what only they can measure.

    Attributes:
        completed: requests that finished; the TPOT percentiles are taken over them.
            (Which requests the TTFT percentiles cover is the extender's to say: the load
            client takes completed requests, the simulator every request with a first token.)
        ttft_p50_s: median time to first token.
        ttft_p95_s: 95th percentile time to first token.
        tpot_p50_s: median time per output token (see :func:`tpot_s`).
        tpot_p90_s: 90th percentile time per output token.
    """

    completed: int
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None

    @staticmethod
    def fields_of(completed: int, ttft: Sequence[float], tpot: Sequence[float]) -> dict[str, Any]:
        """The base fields, from per-request TTFT and TPOT values, for a subclass to extend."""
        return {
            "completed": completed,
            "ttft_p50_s": percentile(ttft, 50),
            "ttft_p95_s": percentile(ttft, 95),
            "tpot_p50_s": percentile(tpot, 50),
            "tpot_p90_s": percentile(tpot, 90),
        }


__all__ = ["LatencySummary", "percentile", "tpot_s"]
