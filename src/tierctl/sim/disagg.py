"""Prefill/decode disaggregation: a prefill pool, a decode pool and the KV hand-off between.

A :class:`~tierctl.sim.disagg_config.DisaggTier` is simulated as one arm. What the model
keeps, from SGLang 0.5.23 (``disaggregation/prefill.py``, ``decode.py``, ``environ.py``) and
vLLM 0.32 (``v1/core/sched/scheduler.py``'s ``WAITING_FOR_REMOTE_KVS`` and delayed block
frees, ``kv_connector/v1/nixl``):

* **Routing.** Each request is sent, on arrival, to the next prefill replica and the next
  decode replica, round robin (the router picks both; its policy is not modelled).
* **Prefill.** The prefill replica runs its own scheduler (every flag of its pool), with the
  request's output cut to the one token a prefill produces (vLLM's proxy asks for
  ``max_tokens=1``; SGLang's prefill server stops there). Its KV stays allocated on the
  prefill replica until the transfer is done (SGLang's inflight queue, vLLM's delayed free),
  so a slow hand-off back-pressures prefill admission.
* **The hand-off queue.** A finished prefill waits, in order, until (a) its prefill replica
  has a free transfer slot (``slots`` at once: SGLang's 4 transfer queues,
  ``SGLANG_DISAGGREGATION_QUEUE_SIZE``; stated for vLLM, whose NIXL transfers have no engine
  bound) and (b) its decode replica can take the prompt's KV: SGLang preallocates it only
  when the pool keeps 512 tokens free for each request it holds and the new one
  (``SGLANG_NUM_RESERVED_DECODE_TOKENS``); vLLM admits it through its waiting queue (a
  ``--max-num-seqs`` slot and the prompt's blocks) into ``WAITING_FOR_REMOTE_KVS``. The
  decode KV is taken when the transfer starts.
* **The transfer** takes ``CostModel.kv_transfer_s(prompt tokens)``: a fixed latency plus
  the prompt's KV bytes over the link, stated per preset (``kv_bytes_per_token``,
  ``kv_transfer_gb_per_s``, ``kv_transfer_base_s``) or overridden; never fitted.
* **Decode.** When the KV has arrived the request joins its decode replica's running batch;
  its first token reaches the client at the end of that replica's next round (SGLang streams
  the prefill's token with the first decode batch; vLLM recomputes the last prompt token in
  its first step). TTFT is from arrival: prefill queue, prefill, hand-off wait, transfer and
  that round. The decode replica's own rules then apply, retraction and preemption included
  (SGLang decode replicas use the retracting scheduler: decode mode admits by its own
  reservation, not by whole outputs).

Every replica keeps its own clock; the simulation advances to the earliest event (an
arrival, the end of a replica's round, the end of a transfer), and is bounded in steps like
one replica's. Not modelled: the router's load balancing, transfer failures and retries,
the decode side's prefix cache, layer-wise (streamed) transfer, host costs.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.disagg_config import DisaggTier
from tierctl.sim.engine import Live, Round, Scheduler, itl_quantile, make_scheduler
from tierctl.sim.result import RequestResult, SimResult, summarize_results
from tierctl.sim.sglang_retract import RetractingScheduler
from tierctl.sim.vllm_policy import VllmScheduler
from tierctl.sim.workload import SimRequest, Workload


@dataclass
class _Replica:
    """One replica of a pool: its scheduler and when its current round ends."""

    name: str
    sched: Scheduler
    free_s: float = 0.0  # when the round in flight ends (the next may start)
    ending: Round | None = None  # the round in flight, its tokens delivered at free_s
    sending: int = 0  # transfers in flight from this (prefill) replica
    expected: int = 0  # transfers in flight to this (decode) replica
    parked: bool = False  # ran an idle round: waits for an event that concerns it
    pending: bool = False  # a round (or a fast-forwarded stretch) ends at free_s

    def wake(self, now: float) -> None:
        """Something changed for this replica: it steps again at ``now`` (or when its round
        in flight ends)."""
        self.parked = False
        if not self.pending and self.free_s < now:
            self.free_s = now


@dataclass
class _Handoff:
    """One request between its prefill and its decode."""

    req: SimRequest
    prefill: int
    decode: int
    prefilled: Live | None = None
    ready_s: float = 0.0
    start_s: float | None = None
    end_s: float | None = None


@dataclass
class _State:
    tier: DisaggTier
    cost: CostModel
    prefills: list[_Replica]
    decodes: list[_Replica]
    handoffs: dict[str, _Handoff] = field(default_factory=dict)
    queue: deque[_Handoff] = field(default_factory=deque)
    transfers: list[tuple[float, str]] = field(default_factory=list)  # heap of (end, rid)
    first_pending: set[str] = field(default_factory=set)  # injected, first token not yet out
    finals: dict[str, Live] = field(default_factory=dict)


def _decode_scheduler(config: EngineConfig, cost: CostModel, seed: int) -> Scheduler:
    """A decode replica's scheduler: SGLang's retracting one (its radix flag aside: decode
    mode admits transferred prompts by its own reservation), vLLM's."""
    if config.engine == "sglang":
        return RetractingScheduler(config, cost, seed)
    return make_scheduler(config, cost, seed, ranks=True)


def simulate_disagg(
    tier: DisaggTier,
    workload: Workload,
    cost: CostModel,
    *,
    seed: int = 0,
    max_steps: int | None = None,
) -> SimResult:
    """Simulate ``workload`` on a disaggregated arm (see the module's docstring); at most
    ``max_steps`` steps (default :func:`tierctl.sim.budget.runtime_bound`)."""
    if max_steps is None:
        from tierctl.sim.budget import runtime_bound

        max_steps = runtime_bound()
    prefills = [
        _Replica(f"prefill[{i}]", make_scheduler(c, cost, seed * 31 + i, ranks=True))
        for i, c in enumerate(tier.prefill)
    ]
    decodes = [
        _Replica(f"decode[{i}]", _decode_scheduler(c, cost, seed * 37 + i))
        for i, c in enumerate(tier.decode)
    ]
    state = _State(tier, _transfer_cost_model(tier, cost), prefills, decodes)
    now, stopped, steps = _drive(state, workload.requests, max_steps)
    return _result(state, workload, cost, now, stopped, steps)


def _transfer_cost_model(tier: DisaggTier, cost: CostModel) -> CostModel:
    gb = tier.transfer.gb_per_s
    return cost if gb is None else dataclasses.replace(cost, kv_transfer_gb_per_s=gb)


def _drive(state: _State, reqs: tuple[SimRequest, ...], max_steps: int) -> tuple[float, str, int]:
    """Advance to the earliest event until nothing is left; (time, why stopped, steps)."""
    nxt, now, steps = 0, 0.0, 0
    reps = [*state.prefills, *state.decodes]
    while True:
        steps += 1
        if steps > max_steps:
            return (
                now,
                (
                    f"stopped after {max_steps:,} scheduler steps at {now:,.1f} simulated s "
                    "(the bound on one simulation); the requests in flight are unfinished"
                ),
                steps,
            )
        t_arr = reqs[nxt].arrival_s if nxt < len(reqs) else math.inf
        t_xfer = state.transfers[0][0] if state.transfers else math.inf
        due = [r for r in reps if r.pending or (r.sched.busy and not r.parked)]
        t_rep = min((r.free_s for r in due), default=math.inf)
        t = min(t_arr, t_xfer, t_rep)
        if t == math.inf:
            if any(r.sched.busy for r in reps) or state.queue:
                return now, _stuck(state), steps
            break
        now = max(now, t)
        if t_arr <= t:
            _arrive(state, reqs[nxt], nxt, now)
            nxt += 1
            continue
        if t_xfer <= t:
            _, rid = heapq.heappop(state.transfers)
            _land(state, rid, now)
            _start_transfers(state, now)
            continue
        rep = min(due, key=lambda r: r.free_s)
        _deliver(state, rep)
        _start_transfers(state, now)
        if not rep.sched.busy:
            continue
        horizon = min(t_arr, state.transfers[0][0] if state.transfers else math.inf)
        others = [r.free_s for r in due if r is not rep]
        horizon = min(horizon, *others) if others else horizon
        if _fast_forward(state, rep, now, horizon):
            continue
        deferred = rep.sched.stats.deferred_rounds
        rnd = rep.sched.step(now)
        if rnd is None:
            continue
        if rnd.kind == "idle" and rep.sched.stats.deferred_rounds == deferred:
            # Nothing runs and nothing is armed: the replica waits for an event that concerns
            # it (an arrival, a transfer landing, a hold released), not round by round.
            rep.parked = True
            rep.ending = None
            continue
        rep.ending = rnd
        rep.pending = True
        rep.free_s = now + rnd.duration_s
    return now, "", steps


def _stuck(state: _State) -> str:
    waiting = sum(len(r.sched.waiting) for r in (*state.prefills, *state.decodes))
    return (
        f"the pools could schedule none of the {waiting + len(state.queue)} waiting "
        "request(s) and nothing was running or in transfer: they are unfinished"
    )


def _fast_forward(state: _State, rep: _Replica, now: float, horizon: float) -> bool:
    """Run a decode replica's pure-decode stretch in closed form up to the next event."""
    sched = rep.sched
    if sched.cost.jittery or not sched.running:
        return False
    if any(x.req.rid in state.first_pending for x in sched.running):
        return False
    if not sched.decode_only(now):
        return False
    end, _n = sched.fast_forward(now, horizon)
    rep.ending = None
    rep.pending = True
    rep.free_s = end
    return True


def _arrive(state: _State, req: SimRequest, index: int, now: float) -> None:
    p = index % len(state.prefills)
    d = index % len(state.decodes)
    h = _Handoff(req, p, d)
    state.handoffs[req.rid] = h
    rep = state.prefills[p]
    outcome = rep.sched.submit(dataclasses.replace(req, output_tokens=1), now)
    if outcome != "queued":
        live = _find(rep.sched, req.rid)
        if live is not None:
            state.finals[req.rid] = dataclasses.replace(live, req=req)
    rep.wake(now)


def _deliver(state: _State, rep: _Replica) -> None:
    """The round that ended at ``rep.free_s``: finished prefills join the hand-off queue,
    first tokens of transferred requests are stamped."""
    rnd, rep.ending = rep.ending, None
    rep.pending = False
    if rnd is None:
        return
    end = rnd.start_s + rnd.duration_s
    if rep in state.prefills:
        for e in rnd.emitted:
            if e.finished:
                _prefilled(state, rep, e.rid, end)
        return
    for e in rnd.emitted:
        if e.index >= 1 and e.rid in state.first_pending:
            state.first_pending.discard(e.rid)
            live = _find(rep.sched, e.rid)
            if live is not None:
                live.first_token_s = end


def _find(sched: Scheduler, rid: str) -> Live | None:
    live = sched.lives.get(rid)
    if live is not None:
        return live
    return next((x for x in reversed(sched.done) if x.req.rid == rid), None)


def _prefilled(state: _State, rep: _Replica, rid: str, end: float) -> None:
    h = state.handoffs[rid]
    live = next(x for x in reversed(rep.sched.done) if x.req.rid == rid)
    h.prefilled = live
    h.ready_s = end
    # The prompt's KV stays on the prefill replica until it has been sent.
    rep.sched.kv_used_tokens += h.req.input_tokens
    state.queue.append(h)


def _decode_room(state: _State, d: int, tokens: int) -> bool:
    """Whether decode replica ``d`` can take a prompt of ``tokens`` now."""
    rep = state.decodes[d]
    sched = rep.sched
    free = sched.kv_pool_tokens - sched.kv_used_tokens
    held = len(sched.running) + len(sched.waiting) + rep.expected
    if isinstance(sched, VllmScheduler):
        return held < sched.max_running and tokens <= free
    reserve = sched.config.rules.decode_reserved_tokens
    return held < sched.max_running and tokens + reserve * (held + 1) <= free


def _start_transfers(state: _State, now: float) -> None:
    """Start every queued hand-off whose prefill replica has a slot and whose decode replica
    has room, in order (a decode replica's queue is first come, first served)."""
    blocked: set[int] = set()
    kept: deque[_Handoff] = deque()
    slots = state.tier.slots
    while state.queue:
        h = state.queue.popleft()
        src = state.prefills[h.prefill]
        if h.decode in blocked or src.sending >= slots:
            kept.append(h)
            continue
        if not _decode_room(state, h.decode, h.req.input_tokens):
            blocked.add(h.decode)
            kept.append(h)
            continue
        dst = state.decodes[h.decode]
        dst.sched.kv_used_tokens += h.req.input_tokens  # preallocated for the transfer
        dst.expected += 1
        src.sending += 1
        h.start_s = now
        h.end_s = now + state.cost.kv_transfer_s(h.req.input_tokens)
        heapq.heappush(state.transfers, (h.end_s, h.req.rid))
    state.queue = kept


def _land(state: _State, rid: str, now: float) -> None:
    """The KV has arrived: free the prefill's hold and start decoding on the decode side."""
    h = state.handoffs[rid]
    src, dst = state.prefills[h.prefill], state.decodes[h.decode]
    src.sending -= 1
    src.sched.kv_used_tokens -= h.req.input_tokens
    dst.expected -= 1
    sched = dst.sched
    pre = h.prefilled
    assert pre is not None
    live = Live(req=h.req, enqueued_s=h.req.arrival_s, last_token_s=now)
    live.admitted_s = pre.admitted_s
    live.cached_tokens = pre.cached_tokens
    live.kv_wait_s = pre.kv_wait_s + ((h.start_s or now) - h.ready_s)
    live.kv_tokens = h.req.input_tokens
    live.status = "decoding"
    sched.lives[rid] = live
    sched.running.append(live)
    sched.context_tokens += h.req.input_tokens
    if isinstance(sched, VllmScheduler):
        sched.order.append(live)
    sched.stats.prompt_tokens += h.req.input_tokens
    state.first_pending.add(rid)
    dst.wake(now)
    src.wake(now)  # its hold is released: a blocked admission may go ahead


def _result(
    state: _State,
    workload: Workload,
    cost: CostModel,
    now: float,
    stopped: str,
    steps: int,
) -> SimResult:
    lives: dict[str, Live] = dict(state.finals)
    for rep in state.decodes:
        for x in [*rep.sched.done, *rep.sched.lives.values()]:
            lives[x.req.rid] = x
    for rid, h in state.handoffs.items():
        if rid in lives:
            continue
        pre = h.prefilled
        if pre is None:  # still on the prefill side
            src = state.prefills[h.prefill].sched
            pre = _find(src, rid)
        stub = Live(req=h.req, enqueued_s=h.req.arrival_s, last_token_s=h.req.arrival_s)
        if pre is not None:
            stub.admitted_s = pre.admitted_s
            stub.cached_tokens = pre.cached_tokens
        lives[rid] = stub
    results = tuple(
        sorted((RequestResult.of(x) for x in lives.values()), key=lambda r: (r.arrival_s, r.rid))
    )
    reps = [*state.prefills, *state.decodes]
    hist = [sum(col) for col in zip(*(r.sched.stats.itl_hist for r in state.decodes), strict=True)]
    kv_waits = sum(r.sched.stats.kv_waits for r in reps)
    summary = summarize_results(
        list(results), kv_waits, (itl_quantile(hist, 0.5), itl_quantile(hist, 0.99))
    )
    summary = dataclasses.replace(summary, preemptions=sum(r.sched.stats.preemptions for r in reps))
    domain = _domain(reps)
    return SimResult(
        workload=workload.name,
        preset=cost.name,
        argv=state.tier.as_config().argv,
        requests=results,
        summary=summary,
        rounds=sum(r.sched.stats.rounds for r in reps),
        prefill_rounds=sum(r.sched.stats.prefill_rounds for r in reps),
        deferred_rounds=sum(r.sched.stats.deferred_rounds for r in reps),
        sim_end_s=now,
        stopped=stopped,
        domain=domain,
        handoff=_handoff_figures(state),
    )


def _domain(reps: list[_Replica]) -> dict[str, int]:
    doms = [r.sched.stats.domain() for r in reps]
    out = doms[0]
    for d in doms[1:]:
        out = out.union(d)
    return out.to_json()


def _peak_overlap(state: _State) -> int:
    """The most transfers any one prefill replica had in flight at once, from the transfers'
    own start and end times."""
    peak = 0
    for p in range(len(state.prefills)):
        edges = sorted(
            (t, step)
            for h in state.handoffs.values()
            if h.prefill == p and h.start_s is not None and h.end_s is not None
            for t, step in ((h.start_s, 1), (h.end_s, -1))
        )
        live = 0
        for _t, step in edges:  # an end at the same time as a start frees its slot first
            live += step
            peak = max(peak, live)
    return peak


def _handoff_figures(state: _State) -> dict[str, Any]:
    waits = [
        (h.start_s - h.ready_s)
        for h in state.handoffs.values()
        if h.start_s is not None and h.prefilled is not None
    ]
    times = [
        h.end_s - h.start_s for h in state.handoffs.values() if h.end_s and h.start_s is not None
    ]
    waits.sort()
    times.sort()

    def q(xs: list[float], p: float) -> float | None:
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None

    return {
        "prefill_replicas": len(state.prefills),
        "decode_replicas": len(state.decodes),
        "transfer_slots": state.tier.slots,
        "transfers": len(times),
        "peak_concurrent_transfers": _peak_overlap(state),
        "handoff_wait_p50_s": q(waits, 0.5),
        "handoff_wait_max_s": waits[-1] if waits else None,
        "transfer_p50_s": q(times, 0.5),
        "transfer_max_s": times[-1] if times else None,
        "kv_transfer": {
            "bytes_per_token": state.cost.kv_bytes_per_token,
            "gb_per_s": state.cost.kv_transfer_gb_per_s,
            "base_s": state.cost.kv_transfer_base_s,
        },
        "left_in_handoff": len(state.queue),
    }
