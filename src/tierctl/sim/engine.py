"""The scheduler model: one SGLang replica, round by round (vLLM's: ``vllm_policy``).

Each call to :meth:`Scheduler.step` is one pass of SGLang's ``get_next_batch_to_run``:

1. ``--prefill-decode-interval``: if the countdown is armed it is decremented and no prefill
   is scheduled this round (unless the running batch is below
   ``--prefill-decode-interval-min-bs``, which disarms it).
2. Otherwise a prefill batch is built: the in-progress chunked request first, then waiting
   requests in arrival order, within the chunk budget ``C``, ``--max-prefill-tokens``,
   ``--max-running-requests`` and the KV pool (a request is admitted only when its new
   prompt tokens and its output fit; the head of the queue blocks the rest).
3. A prefill batch runs (with the running decodes riding along under
   ``--enable-mixed-chunk``) and re-arms the countdown; otherwise the running batch decodes
   one token each; otherwise the round idles.

The model is pure: it holds no clock and no randomness. Callers pass the simulated time in.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.domain import StepDomain
from tierctl.sim.prefix_cache import PrefixCache
from tierctl.sim.surface import SGLANG, VLLM
from tierctl.sim.workload import SimRequest
from tierctl.traces import BLOCK_TOKENS

# ITL histogram: log-spaced buckets from 0.1 ms, 20 per e-fold (~5% wide).
_ITL_FLOOR_S = 1e-4
_ITL_PER_EFOLD = 20.0
_ITL_BUCKETS = 400


@dataclass(slots=True)
class Live:
    """A request's mutable state inside the scheduler."""

    req: SimRequest
    enqueued_s: float
    cached_tokens: int = 0
    prefilled_tokens: int = 0
    admitted_s: float | None = None
    generated: int = 0
    first_token_s: float | None = None
    last_token_s: float = 0.0
    finished_s: float | None = None
    itl_max_s: float = 0.0
    kv_tokens: int = 0
    # vLLM: the tokens holding KV slots in the request's blocks (kv_tokens is whole blocks).
    kv_slots: int = 0
    kv_wait_s: float = 0.0
    kv_blocked_since: float | None = None
    status: str = "waiting"
    #: Why a request was refused or aborted ("" otherwise): what the reports count by.
    reason: str = ""
    # Output tokens to recompute as prompt after a preemption (vLLM's recompute mode).
    resumed_tokens: int = 0
    preemptions: int = 0
    # The scheduler's prefill epoch when this request last produced a token: a later epoch
    # means a prefill ran while it waited for its next token.
    epoch: int = 0
    burst_gap_sum_s: float = 0.0
    burst_gaps: int = 0
    burst_tokens: int = 0

    @property
    def extend_tokens(self) -> int:
        """Prompt tokens that must be computed (not served from the prefix cache)."""
        return self.req.input_tokens + self.resumed_tokens - self.cached_tokens


@dataclass(frozen=True)
class Emission:
    """A token produced at the end of a round: the request and its 1-based output index."""

    rid: str
    index: int
    finished: bool


@dataclass(frozen=True)
class Round:
    """One scheduler round: what ran, how long it took, and the tokens it produced."""

    start_s: float
    duration_s: float
    kind: str  # "prefill" | "mixed" | "decode" | "idle"
    chunks: tuple[tuple[int, int], ...]
    batch_size: int
    context_tokens: int
    emitted: tuple[Emission, ...] = ()


@dataclass
class SchedulerStats:
    """Counters the scheduler keeps for metrics and reports."""

    rounds: int = 0
    prefill_rounds: int = 0
    deferred_rounds: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    kv_waits: int = 0
    preemptions: int = 0
    # Prompt and output tokens computed again after a preemption or retraction (recompute).
    recomputed_tokens: int = 0
    # Speculative decoding, as the engines count it: verify rounds (one per sequence per
    # round) and, per draft position, the rounds that accepted it (tierctl.sim.accept_fit).
    spec_drafts: int = 0
    spec_accepted_by_position: list[int] = field(default_factory=list)
    itl_hist: list[int] = field(default_factory=lambda: [0] * _ITL_BUCKETS)
    # The largest step shapes run (what a fitted cost model is asked about; sim.domain).
    max_step_tokens: int = 0
    max_position: int = 0
    max_batch: int = 0
    max_context: int = 0

    def note_prefill(self, chunks: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> None:
        """Widen the shapes seen by one extend step's chunks (new, already computed)."""
        tokens = 0
        for c, p in chunks:
            tokens += c
            if p > self.max_position:
                self.max_position = p
        if tokens > self.max_step_tokens:
            self.max_step_tokens = tokens

    def note_decode(self, batch: int, context: int) -> None:
        """Widen the shapes seen by one decode batch."""
        if batch > self.max_batch:
            self.max_batch = batch
        if context > self.max_context:
            self.max_context = context

    def domain(self) -> StepDomain:
        """The shapes seen, as a :class:`~tierctl.sim.domain.StepDomain`."""
        return StepDomain(self.max_step_tokens, self.max_position, self.max_batch, self.max_context)


class Scheduler:
    """A discrete-event model of one engine replica's scheduler."""

    def __init__(self, config: EngineConfig, cost: CostModel, seed: int = 0) -> None:
        self.config = config
        self.cost = cost
        self._jitter_rng = random.Random(seed)
        # The slow stretches' own draws (CostModel.step_jitter_slow), apart from the per-step
        # jitter's so a model without them keeps its draws.
        self._slow_rng = random.Random(seed * 7919 + 17)
        self._slow_z = 0.0
        self._slow_left = 0
        chunk = config.chunked_prefill_size
        if chunk is None:
            chunk = cost.chunked_prefill_size
        self.chunk_tokens: int | None = chunk if chunk > 0 else None
        self.max_running = config.max_running_requests or cost.max_running_requests
        self.kv_pool_tokens = config.max_total_tokens or cost.kv_pool_tokens
        self.interval_rounds = config.prefill_decode_interval
        # HiCache keeps evicted prefixes in a host pool of ratio x the device pool (2.0 by
        # default in cache mode); the simulator treats host hits as free to load.
        ratio = config.hicache_ratio if config.hicache_ratio is not None else 2.0
        self.host_cache_tokens = (
            int(ratio * self.kv_pool_tokens) if config.enable_hierarchical_cache else 0
        )
        self.cache: PrefixCache | None = (
            None if config.disable_radix_cache else PrefixCache(BLOCK_TOKENS)
        )
        self.waiting: deque[Live] = deque()
        self.running: list[Live] = []
        self.chunked: Live | None = None
        self.lives: dict[str, Live] = {}
        self.done: list[Live] = []
        self.countdown = 0
        self.kv_used_tokens = 0
        self.context_tokens = 0
        self.prefill_epoch = 0
        self.stats = SchedulerStats()
        # Speculative decoding: (draft steps, draft tokens) when the argv turns it on and the
        # cost model has its terms; its acceptance draws come from their own seeded stream.
        on = cost.spec_accept_rate > 0 or any(cost.spec_accept_by_position)
        self.spec = config.speculative if on else None
        self._spec_rng = random.Random(seed * 7919 + 17)
        # The overlap scheduler's late free (SimRules.overlap_frees_late): what requests
        # finishing this round give back (slots, KV tokens), and what the round being
        # scheduled may not yet admit into.
        self._frees_late = config.rules.overlap_frees_late and not config.disable_overlap_schedule
        self._freed_now = (0, 0)
        self._freed_late = (0, 0)

    def freed_late(self) -> tuple[int, int]:
        """The slots and KV tokens given back last round that this round may not admit into
        yet (the overlap scheduler's late free; (0, 0) without it). Only while other requests
        run: with none there is no batch to overlap, and the results are processed at once."""
        return self._freed_late if self.running else (0, 0)

    def prefill_budget(self) -> int | None:
        """The most prompt tokens one step prefills (the chunk), ``None`` when unchunked."""
        return self.chunk_tokens

    # -- intake -------------------------------------------------------------------------

    def submit(self, req: SimRequest, now_s: float) -> str:
        """Enqueue a request; returns ``"queued"``, ``"queue_full"`` or ``"too_long"``.

        A full queue aborts the incoming request, as SGLang 0.5.23 does
        (``_abort_on_queued_limit``); a request that can never fit the KV pool is refused.
        """
        live = Live(req=req, enqueued_s=now_s, last_token_s=now_s)
        limit = self.config.max_queued_requests
        if limit is not None and len(self.waiting) + 1 > limit:
            live.status = "aborted"
            live.reason = f"queue full (max-queued-requests {limit})"
            self._close(live, now_s)
            return "queue_full"
        if req.input_tokens + req.output_tokens > self.kv_pool_tokens:
            live.status = "rejected"
            live.reason = f"prompt + output exceed the KV pool ({self.kv_pool_tokens} tokens)"
            self._close(live, now_s)
            return "too_long"
        self.lives[req.rid] = live
        self.waiting.append(live)
        return "queued"

    def abort(self, rid: str, now_s: float) -> bool:
        """Drop a request wherever it is (a client went away); True if it was live."""
        live = self.lives.get(rid)
        if live is None:
            return False
        if live in self.waiting:
            self.waiting.remove(live)
        elif live is self.chunked:
            self.chunked = None
        elif live in self.running:
            self.running.remove(live)
            self.context_tokens -= live.req.input_tokens + live.generated
        self.kv_used_tokens -= live.kv_tokens
        live.status = "aborted"
        live.reason = live.reason or "aborted by the client"
        self._close(live, now_s)
        return True

    @property
    def busy(self) -> bool:
        """Whether a round would do anything besides idling."""
        return bool(self.running or self.chunked or self.waiting)

    def counts(self) -> tuple[int, int]:
        """(running, waiting) as the engine's gauges count them (SGLang: the chunked request
        is still queued)."""
        return len(self.running), len(self.waiting) + (1 if self.chunked else 0)

    def idle(self, elapsed_s: float) -> None:
        """Account for idle rounds spun while nothing was runnable (they drain the countdown)."""
        if self.countdown and elapsed_s > 0:
            spun = int(elapsed_s / max(self.cost.round_overhead_s, 1e-9))
            self.countdown = max(0, self.countdown - spun)

    def spin_deferred(self, now_s: float) -> float | None:
        """Run, as one, the deferred rounds that would find nothing to decode; the new time,
        or None when the next round is not such a round.

        While the countdown is armed and nothing runs, a round changes nothing but the clock
        (arrivals only queue), so ``N`` such rounds end where one round of ``N`` times the
        overhead ends; an interval of 10**15 then costs one step, not 10**15 (it hung
        ``sim run``). Step logs keep every round: callers recording steps step them.
        """
        if not self.busy or self.running or self.countdown <= 0:
            return None
        if self.config.prefill_decode_interval_min_bs > 0:
            return None  # the round resets the countdown instead of deferring
        spun = self.countdown
        self.countdown = 0
        self.stats.rounds += spun
        self.stats.deferred_rounds += spun
        return now_s + self.cost.round_overhead_s * spun

    def jittered(self, dur_s: float) -> float:
        """A working round's time with the cost model's step jitter drawn (none at 0)."""
        sigma = self.cost.step_jitter
        log_f = sigma * self._jitter_rng.gauss(0.0, 1.0) if sigma > 0 else 0.0
        slow = self.cost.step_jitter_slow
        if slow > 0:
            if self._slow_left <= 0:
                self._slow_z = self._slow_rng.gauss(0.0, 1.0)
                self._slow_left = self.cost.step_jitter_block or 1 << 62
            self._slow_left -= 1
            log_f += slow * self._slow_z
        return dur_s * math.exp(log_f) if log_f else dur_s

    # -- one round ----------------------------------------------------------------------

    def step(self, now_s: float) -> Round | None:
        """Run one scheduler round starting at ``now_s``; None when there is nothing to do."""
        if not self.busy:
            return None
        cost = self.cost
        self.stats.rounds += 1
        self._freed_late, self._freed_now = self._freed_now, (0, 0)
        defer = False
        if self.countdown > 0:
            if len(self.running) < self.config.prefill_decode_interval_min_bs:
                self.countdown = 0
            else:
                self.countdown -= 1
                defer = True
                self.stats.deferred_rounds += 1
        chunks: list[tuple[int, int]] = []
        completing: list[Live] = []
        mixed = False
        in_burst = self.chunked is not None
        if not defer:
            # SGLang 0.5.23 turns mixed chunks off under EAGLE-family and NGRAM speculative
            # decoding (arg_groups/speculative_hook.py: supports_mixed_chunk is False).
            mixed = (
                self.config.enable_mixed_chunk
                and self.config.speculative is None
                and bool(self.running)
            )
            chunks, completing = self._build_prefill(now_s, len(self.running) if mixed else 0)
        if chunks:
            self.stats.prefill_rounds += 1
            self.prefill_epoch += 1
            self.stats.note_prefill(chunks)
            dur = cost.round_overhead_s + self.extend_s(chunks)
            riders = self.running if mixed else []
            if riders:
                self.stats.note_decode(len(riders), self.context_tokens)
                dur += cost.decode_marginal_s(len(riders), self.context_tokens)
            dur = self.jittered(dur)
            end = now_s + dur
            emitted = self._decode_tokens(riders, end, True) if riders else []
            for live in completing:
                emitted.append(self._first_token(live, end))
            if self.interval_rounds:
                self.countdown = self.interval_rounds
            return Round(
                now_s,
                dur,
                "mixed" if riders else "prefill",
                tuple(chunks),
                len(riders) + len(completing),
                self.context_tokens,
                tuple(emitted),
            )
        if self.running:
            self._before_decode(now_s)
        if self.running:
            b, k = len(self.running), self.context_tokens
            self.stats.note_decode(b, k)
            dur = self.jittered(cost.round_overhead_s + self.decode_round_s(b, k))
            emitted = self._decode_tokens(self.running, now_s + dur, in_burst)
            return Round(now_s, dur, "decode", (), b, k, tuple(emitted))
        return Round(now_s, cost.round_overhead_s, "idle", (), 0, 0)

    def _before_decode(self, now_s: float) -> None:
        """Policy work before a decode round runs the running batch (SGLang's retraction when
        the KV pool cannot hold the next tokens: :mod:`tierctl.sim.sglang_retract`)."""

    def extend_s(self, chunks: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> float:
        """An extend step's cost: the target's prefill, plus the draft model over the same
        chunk under speculative decoding."""
        base = self.cost.prefill_s(chunks)
        return base * (1.0 + self.cost.spec_draft_extend_frac) if self.spec else base

    def decode_round_s(self, batch: int, context: int) -> float:
        """A decode round's cost: one step, or under speculative decoding the draft steps
        and the verify of every sequence's draft tokens."""
        base = self.cost.decode_s(batch, context)
        if self.spec is None:
            return base
        return base + self.cost.spec_round_s(batch, *self.spec)

    def _tokens_this_round(self, left: int) -> int:
        """Tokens one sequence gains in a decode round: 1, or under speculative decoding 1
        plus the accepted run of its draft (each accepted with the cost model's rate while
        all before it were), at most what it still has to generate."""
        if self.spec is None or left <= 1:
            return 1
        rate, rng = self.cost.spec_accept_rate, self._spec_rng
        by_position = self.cost.spec_accept_by_position
        stats = self.stats
        counts = stats.spec_accepted_by_position
        if len(counts) < self.spec[0]:
            counts.extend([0] * (self.spec[0] - len(counts)))
        stats.spec_drafts += 1
        n = 1
        for k in range(self.spec[0]):
            if rng.random() >= (by_position[k] if k < len(by_position) else rate):
                break
            counts[k] += 1
            n += 1
        return min(n, left)

    def _build_prefill(self, now_s: float, riders: int) -> tuple[list[tuple[int, int]], list[Live]]:
        rem_chunk = None if self.chunk_tokens is None else self.chunk_tokens - riders
        rem_input = self.config.max_prefill_tokens - riders
        chunks: list[tuple[int, int]] = []
        completing: list[Live] = []
        if self.chunked is not None:
            live = self.chunked
            left = live.extend_tokens - live.prefilled_tokens
            take = left if rem_chunk is None else min(left, max(rem_chunk, 1))
            chunks.append((take, live.cached_tokens + live.prefilled_tokens))
            live.prefilled_tokens += take
            if live.prefilled_tokens < live.extend_tokens:
                return chunks, completing
            self.chunked = None
            completing.append(live)
            rem_input -= take
            if rem_chunk is not None:
                rem_chunk -= take
        # Slots given back last round are not yet free under the overlap scheduler.
        in_batch = len(self.running) + len(completing) + self.freed_late()[0]
        self._order_by_priority()
        while self.waiting:
            if rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
                break
            if in_batch >= self.max_running:
                break
            live = self.waiting[0]
            if not self._admit(live, now_s):
                break
            self.waiting.popleft()
            extend = live.extend_tokens
            if self.chunk_tokens is None and chunks and extend > rem_input:
                # Without chunking a request larger than the budget goes alone next round.
                self._unadmit(live)
                self.waiting.appendleft(live)
                break
            take = extend if rem_chunk is None else min(extend, rem_chunk)
            chunks.append((take, live.cached_tokens))
            live.prefilled_tokens = take
            rem_input -= take
            if rem_chunk is not None:
                rem_chunk -= take
            if take < extend:
                self.chunked = live
                break
            completing.append(live)
            in_batch += 1
        return chunks, completing

    def _order_by_priority(self) -> None:
        """SGLang 0.5.23 (``schedule_policy.py``, ``_sort_by_priority_and_fcfs``): FCFS with
        ``--enable-priority-scheduling`` sorts the queue by priority (higher values first
        unless ``--schedule-low-priority-values-first``), then by when each entered it."""
        if not self.config.enable_priority_scheduling or len(self.waiting) < 2:
            return
        sign = 1 if self.config.schedule_low_priority_values_first else -1
        ordered = sorted(self.waiting, key=lambda x: (x.req.priority * sign, x.enqueued_s))
        self.waiting.clear()
        self.waiting.extend(ordered)

    def _admit(self, live: Live, now_s: float) -> bool:
        req = live.req
        cached = 0
        if self.cache is not None and req.block_hashes:
            cached = min(self.cache.match(req.block_hashes), req.input_tokens - 1)
        need = req.input_tokens - cached + req.output_tokens
        free_for_new = self.kv_pool_tokens - self.kv_used_tokens - self.freed_late()[1]
        if need > free_for_new:
            if live.kv_blocked_since is None:
                live.kv_blocked_since = now_s
                self.stats.kv_waits += 1
            return False
        if self.cache is not None:
            self.cache.evict_to(free_for_new - need + self.host_cache_tokens)
        if live.kv_blocked_since is not None:
            live.kv_wait_s = now_s - live.kv_blocked_since
        live.cached_tokens = cached
        live.kv_tokens = need
        live.admitted_s = now_s
        live.status = "prefilling"
        self.kv_used_tokens += need
        self.stats.prompt_tokens += req.input_tokens
        self.stats.cached_tokens += cached
        return True

    def _unadmit(self, live: Live) -> None:
        self.kv_used_tokens -= live.kv_tokens
        self.stats.prompt_tokens -= live.req.input_tokens
        self.stats.cached_tokens -= live.cached_tokens
        live.kv_tokens = 0
        live.admitted_s = None
        live.status = "waiting"

    def _first_token(self, live: Live, end_s: float) -> Emission:
        live.epoch = self.prefill_epoch
        live.generated = 1
        live.first_token_s = end_s
        live.last_token_s = end_s
        if live.req.output_tokens <= 1:
            self._finish(live, end_s)
            return Emission(live.req.rid, 1, True)
        live.status = "decoding"
        self.running.append(live)
        self.context_tokens += live.req.input_tokens + 1
        return Emission(live.req.rid, 1, False)

    # -- preemption by recompute (the engines' policies choose whom, when and where to) ---

    def _free_for_recompute(self, live: Live) -> None:
        """Free a scheduled request's KV for recompute: out of the running batch (when it
        decodes), its outputs so far to be computed again with its prompt, counted as a
        preemption. The engine's policy chose the victim and puts it back in the queue."""
        if live.status == "decoding":
            self.running.remove(live)
            self.context_tokens -= live.req.input_tokens + live.generated
        self.kv_used_tokens -= live.kv_tokens
        live.kv_tokens = 0
        live.resumed_tokens = live.generated
        live.prefilled_tokens = 0
        live.status = "waiting"
        live.preemptions += 1
        self.stats.preemptions += 1
        self.stats.recomputed_tokens += live.req.input_tokens + live.generated

    def _ff_slot_cap(self) -> int:
        """Fast-forward rounds the free pool holds at one KV slot per running request a round
        (engines that take KV as tokens are computed, not reserved up front)."""
        b = max(1, len(self.running))
        return max(1, (self.kv_pool_tokens - self.kv_used_tokens) // b)

    def _ff_take_slots(self, rounds: int) -> None:
        """Account ``rounds`` fast-forwarded decode rounds at one KV slot per request each."""
        for live in self.running:
            live.kv_tokens += rounds
        self.kv_used_tokens += rounds * len(self.running)

    def _resume_decoding(self, live: Live, end_s: float) -> Emission:
        """A preempted request recomputed its prompt and outputs: the step samples its next
        token (the gap since its last one counts as one inter-token gap) and it decodes on."""
        gap = end_s - live.last_token_s
        live.itl_max_s = max(live.itl_max_s, gap)
        live.burst_gap_sum_s += gap
        live.burst_gaps += 1
        live.burst_tokens += 1
        live.epoch = self.prefill_epoch
        live.generated += 1
        live.last_token_s = end_s
        live.resumed_tokens = 0
        live.prefilled_tokens = 0
        done = live.generated >= live.req.output_tokens
        if done:
            self._finish(live, end_s)
        else:
            live.status = "decoding"
            self.running.append(live)
            self.context_tokens += live.req.input_tokens + live.generated
        return Emission(live.req.rid, live.generated, done)

    def _decode_tokens(self, batch: list[Live], end_s: float, in_burst: bool) -> list[Emission]:
        """One token for each of ``batch`` at ``end_s``.

        ``in_burst``: a prefill was in progress when the round started; a gap also counts as
        in-burst when a prefill round ran inside it (the starvation the per-request means hide).
        """
        out: list[Emission] = []
        finished: list[Live] = []
        hist = self.stats.itl_hist
        epoch = self.prefill_epoch
        grown = 0
        for live in batch:
            gap = end_s - live.last_token_s
            if gap > live.itl_max_s:
                live.itl_max_s = gap
            # One delivery per round: a speculative round's accepted tokens arrive together.
            n = self._tokens_this_round(live.req.output_tokens - live.generated)
            if in_burst or live.epoch != epoch:
                live.burst_gap_sum_s += gap
                live.burst_gaps += 1
                live.burst_tokens += n
                live.epoch = epoch
            hist[_itl_bucket(gap)] += 1
            for _ in range(n):
                live.generated += 1
                out.append(
                    Emission(live.req.rid, live.generated, live.generated >= live.req.output_tokens)
                )
            grown += n
            live.last_token_s = end_s
            if live.generated >= live.req.output_tokens:
                finished.append(live)
        self.context_tokens += grown
        for live in finished:
            self.running.remove(live)
            self.context_tokens -= live.req.input_tokens + live.generated
            self._finish(live, end_s)
        return out

    def _finish(self, live: Live, end_s: float) -> None:
        if self._frees_late:
            slots, kv = self._freed_now
            self._freed_now = (slots + 1, kv + live.kv_tokens)
        self.kv_used_tokens -= live.kv_tokens
        live.kv_tokens = 0
        live.status = "completed"
        if self.cache is not None and live.req.block_hashes:
            self.cache.insert(live.req.block_hashes)
        self._close(live, end_s)

    def _close(self, live: Live, end_s: float) -> None:
        live.finished_s = end_s
        self.lives.pop(live.req.rid, None)
        self.done.append(live)

    # -- fast-forward (offline only) ----------------------------------------------------

    def decode_only(self, now_s: float) -> bool:
        """True when the next rounds are pure decode until a finish or an arrival.

        That holds when no prefill is in progress and the waiting queue is empty or its head
        cannot be admitted (the blocking conditions only change when a request finishes).
        A head blocked on KV room is recorded as waiting from ``now_s``, as a stepped round
        would record it.
        """
        if not self.running or self.chunked is not None or self.spec is not None:
            return False  # speculative rounds draw their acceptance: stepped one by one
        if not self.waiting:
            return True
        if self._freed_now[0]:
            return False  # the late free lasts one round: stepped, so admission comes after
        if len(self.running) >= self.max_running:
            return True
        if self.countdown > 0 and len(self.running) >= self.config.prefill_decode_interval_min_bs:
            # The next round defers prefill anyway; step it so admission is tried in order.
            return False
        head_live = self.waiting[0]
        head = head_live.req
        cached = 0
        if self.cache is not None and head.block_hashes:
            cached = self.cache.match(head.block_hashes, touch=False)
            cached = min(cached, head.input_tokens - 1)
        blocked = head.input_tokens - cached + head.output_tokens > (
            self.kv_pool_tokens - self.kv_used_tokens
        )
        if blocked and head_live.kv_blocked_since is None:
            head_live.kv_blocked_since = now_s
            self.stats.kv_waits += 1
        return blocked

    def fast_forward(self, now_s: float, until_s: float) -> tuple[float, int]:
        """Run decode rounds in closed form until the first finish or ``until_s``.

        Equivalent to calling :meth:`step` round by round while :meth:`decode_only` holds:
        rounds start while their start time is before ``until_s``; the last one may finish
        requests. Returns the new time and the number of rounds run.
        """
        run = self.running
        b = len(run)
        cost = self.cost
        c0 = cost.round_overhead_s + cost.decode_s(b, self.context_tokens)
        s = cost.decode_per_ctx_token_s * b  # each round adds b context tokens

        def t_after(n: int) -> float:
            return n * c0 + s * n * (n - 1) / 2

        n_finish = min(live.req.output_tokens - live.generated for live in run)
        n = min(n_finish, self._ff_round_cap())
        # A round whose closed-form start falls within rounding of the arrival starts with
        # it, as the stepped rounds' summed times put it there (not a hair before it).
        horizon = (until_s - now_s) * (1.0 - 1e-12)
        if until_s < math.inf and t_after(n) >= horizon:
            # Smallest n with t_after(n) >= horizon, from the quadratic, then nudged exact.
            # Only searched below the rounds to the first finish: a horizon 1e308 s away put
            # the estimate where adding 1 no longer changes a float, and the nudge never ended.
            if s > 0:
                n_est = (-(c0 - s / 2) + math.sqrt((c0 - s / 2) ** 2 + 2 * s * horizon)) / s
            else:
                n_est = horizon / c0
            n_until = min(n, max(1, math.ceil(n_est)))
            while n_until > 1 and t_after(n_until - 1) >= horizon:
                n_until -= 1
            while n_until < n and t_after(n_until) < horizon:
                n_until += 1
            n = n_until
        n = max(n, 1)
        if n == 1:
            rnd = self.step(now_s)
            assert rnd is not None
            return now_s + rnd.duration_s, 1
        end = now_s + t_after(n)
        first_end = now_s + c0
        hist = self.stats.itl_hist
        # Rounds 1..n-1 have gaps c0 + s*i, increasing: count them bucket by bucket.
        lo_b, hi_b = _itl_bucket(c0 + s), _itl_bucket(c0 + s * (n - 1))
        start = 1
        for j in range(lo_b, hi_b + 1):
            if j == hi_b or s <= 0:
                stop = n
            else:
                edge = _ITL_FLOOR_S * math.exp((j + 1) / _ITL_PER_EFOLD)
                stop = min(n, max(start, math.ceil((edge - c0) / s)))
            hist[j] += (stop - start) * b
            start = stop
            if start >= n:
                break
        last_gap = c0 + s * (n - 1)
        finished: list[Live] = []
        self._ff_account(n)
        for live in run:
            gap0 = first_end - live.last_token_s
            if live.epoch != self.prefill_epoch:
                live.burst_gap_sum_s += gap0
                live.burst_gaps += 1
                live.burst_tokens += 1
                live.epoch = self.prefill_epoch
            hist[_itl_bucket(gap0)] += 1
            live.itl_max_s = max(live.itl_max_s, gap0, last_gap)
            live.generated += n
            live.last_token_s = end
            if live.generated >= live.req.output_tokens:
                finished.append(live)
        self.context_tokens += n * b
        self.stats.note_decode(b, self.context_tokens - b)
        self.stats.rounds += n
        if self.countdown:
            if b < self.config.prefill_decode_interval_min_bs:
                self.countdown = 0
            else:
                self.stats.deferred_rounds += min(self.countdown, n)
                self.countdown = max(0, self.countdown - n)
        # n decode rounds admitted nothing: a late free from before them has lapsed, as it
        # would have round by round; the finishes of the last round free late again.
        self._freed_now = self._freed_late = (0, 0)
        for live in finished:
            run.remove(live)
            self.context_tokens -= live.req.input_tokens + live.generated
            self._finish(live, end)
        return end, n

    def _ff_round_cap(self) -> int:
        """The most decode rounds :meth:`fast_forward` may run before the policy must look
        again (vLLM: before the KV pool runs out and a request must be preempted)."""
        return 1 << 62

    def _ff_account(self, rounds: int) -> None:
        """Policy bookkeeping for ``rounds`` fast-forwarded decode rounds (KV growth)."""


#: One engine's scheduler model for a config: ``(config, cost, seed, ranks)``.
SchedulerPolicy = Callable[[EngineConfig, CostModel, int, bool], "Scheduler"]
#: The scheduler policies, by engine kind: an engine the simulator models registers one
#: (:func:`register_policy`); nothing else in sim/ chooses a scheduler by kind.
POLICIES: dict[str, SchedulerPolicy] = {}


def register_policy(kind: str) -> Callable[[SchedulerPolicy], SchedulerPolicy]:
    """Register the decorated function as engine ``kind``'s scheduler policy."""

    def register(policy: SchedulerPolicy) -> SchedulerPolicy:
        POLICIES[kind] = policy
        return policy

    return register


@register_policy(SGLANG.kind)
def _sglang_policy(config: EngineConfig, cost: CostModel, seed: int, ranks: bool) -> Scheduler:
    """SGLang's scheduler; its DP attention ranks as D schedulers stepping together (offline,
    ``ranks``), or the retracting one where its release retracts decodes."""
    if ranks and config.enable_dp_attention and config.dp_size > 1:
        from tierctl.sim.dp_attention import DpAttentionScheduler

        return DpAttentionScheduler(config, cost, seed)
    if config.rules.retract_decode and not config.disable_radix_cache:
        from tierctl.sim.sglang_retract import RetractingScheduler

        return RetractingScheduler(config, cost, seed)
    return Scheduler(config, cost, seed)


@register_policy(VLLM.kind)
def _vllm_policy(config: EngineConfig, cost: CostModel, seed: int, ranks: bool) -> Scheduler:
    """vLLM v1's scheduler."""
    from tierctl.sim.vllm_policy import VllmScheduler

    return VllmScheduler(config, cost, seed)


def make_scheduler(
    config: EngineConfig, cost: CostModel, seed: int = 0, *, ranks: bool = False
) -> Scheduler:
    """The scheduler model of ``config``'s engine, by its registered policy (``seed`` draws
    the steps' jitter when the cost model has any; ``ranks``: model SGLang's DP attention
    ranks, ``--enable-dp-attention --dp-size D``, as D schedulers stepping together).

    Raises:
        InputError: the engine has no scheduler policy (the simulator does not model it).
    """
    policy = POLICIES.get(config.engine)
    if policy is None:
        raise InputError(
            f"the simulator has no scheduler model of {config.engine!r}",
            rule="sim-engine",
            value=config.engine,
            fix=f"simulate one of {', '.join(POLICIES)} (docs/sim.md)",
        )
    return policy(config, cost, seed, ranks)


def _itl_bucket(gap_s: float) -> int:
    if gap_s <= _ITL_FLOOR_S:
        return 0
    return min(int(math.log(gap_s / _ITL_FLOOR_S) * _ITL_PER_EFOLD), _ITL_BUCKETS - 1)


def itl_quantile(hist: list[int], q: float) -> float:
    """The ``q`` quantile of the ITL histogram (bucket's geometric middle); 0 when empty."""
    total = sum(hist)
    if total == 0:
        return 0.0
    target = q * total
    acc = 0
    for i, c in enumerate(hist):
        acc += c
        if acc >= target and c:
            return _ITL_FLOOR_S * math.exp((i + 0.5) / _ITL_PER_EFOLD)
    return _ITL_FLOOR_S * math.exp((_ITL_BUCKETS - 0.5) / _ITL_PER_EFOLD)
