"""Host-side costs: what happens on the server's event loop before the scheduler sees a request.

Peers model GPU time only. The field report's ingestion incident was host time: SGLang's
tokenizer manager tokenized each prompt on the asyncio loop that also answers ``/health``, so a
burst of multi-MB prompts kept the loop busy for seconds at a time and the proxy's 3 s probes
failed while the GPUs stayed busy. The model here:

* every request costs ``request_overhead_s`` of loop time (parsing, bookkeeping);
* tokenizing costs ``tokenize_per_byte_s`` per prompt byte (prompt bytes are estimated as
  ``bytes_per_token`` per prompt token): on the loop by default, or, with SGLang's
  ``--enable-dynamic-batch-tokenizer``, on one worker thread (the loop stays free; prompts
  still tokenize one after another);
* the loop serves requests in arrival order; a request reaches the scheduler when its
  tokenization ends, so its TTFT and E2E include the wait;
* a health probe sent while the loop is busy is answered when the loop frees up.

Scheduler overhead per round is the cost model's ``round_overhead_s``. Detokenization is not
charged: SGLang and vLLM v1 run it outside the loop and the scheduler, and the simulated
server's real streaming cost is measured by ``benchmarks/sim_server.py`` instead.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.workload import SimRequest


@dataclass(frozen=True)
class HostPlan:
    """When each request reaches the scheduler, and when the event loop was busy."""

    ready_s: tuple[float, ...]  # per request, in workload order
    busy: tuple[tuple[float, float], ...]  # loop busy intervals, sorted, disjoint


def tokenizes_on_loop(config: EngineConfig) -> bool:
    """Whether prompts are tokenized on the event loop that answers probes."""
    return not (config.engine == "sglang" and config.enable_dynamic_batch_tokenizer)


def has_host_costs(cost: CostModel) -> bool:
    """Whether the cost model charges any host-side time."""
    return cost.tokenize_per_byte_s > 0 or cost.request_overhead_s > 0


def plan_host(requests: tuple[SimRequest, ...], cost: CostModel, on_loop: bool) -> HostPlan:
    """Serve the requests' host work in arrival order on the loop (and the tokenizer thread)."""
    loop_free = 0.0
    worker_free = 0.0
    ready: list[float] = []
    busy: list[tuple[float, float]] = []
    for req in requests:
        tok_s = cost.tokenize_per_byte_s * cost.bytes_per_token * req.input_tokens
        start = max(req.arrival_s, loop_free)
        loop_s = cost.request_overhead_s + (tok_s if on_loop else 0.0)
        loop_free = start + loop_s
        _extend(busy, start, loop_free)
        if on_loop:
            ready.append(loop_free)
        else:
            begin = max(loop_free, worker_free)
            worker_free = begin + tok_s
            ready.append(worker_free)
    return HostPlan(tuple(ready), tuple(busy))


def _extend(busy: list[tuple[float, float]], start: float, end: float) -> None:
    if end <= start:
        return
    if busy and busy[-1][1] >= start:
        busy[-1] = (busy[-1][0], max(busy[-1][1], end))
    else:
        busy.append((start, end))


def probe_latencies(
    plan: HostPlan, end_s: float, interval_s: float, overhead_s: float
) -> list[float]:
    """Latency of a health probe every ``interval_s`` from 0 to ``end_s``: the wait for the
    loop to free up, plus its own handling."""
    starts = [b[0] for b in plan.busy]
    out: list[float] = []
    n = int(end_s / interval_s) + 1 if interval_s > 0 else 0
    for i in range(n):
        t = i * interval_s
        j = bisect.bisect_right(starts, t) - 1
        wait = plan.busy[j][1] - t if j >= 0 and plan.busy[j][1] > t else 0.0
        out.append(wait + overhead_s)
    return out
