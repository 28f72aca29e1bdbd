"""vLLM v1's scheduling policy, round by round, beside SGLang's (:mod:`tierctl.sim.engine`).

Read from ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``) and
``vllm/config/scheduler.py``; what the model keeps of it:

1. **No phases.** Each step hands out a token budget (``--max-num-batched-tokens``). The
   *running* requests go first, in the order they were admitted: a decoding request takes one
   token, a request still prefilling takes the rest of its prompt, capped by
   ``--long-prefill-token-threshold`` (when > 0) and by what is left of the budget. So decode
   is never starved by a long prompt admitted after it, and a long prompt admitted before a
   decoding request can take the whole budget ahead of it.
2. **Then the waiting queue**, in arrival order, while budget is left and fewer than
   ``--max-num-seqs`` requests run, and only if no request was preempted this step: the
   prefix-cached tokens are skipped, the chunk is capped as above, and without chunked prefill
   (``--no-enable-chunked-prefill``) a prompt that does not fit the remaining budget stops the
   queue. A request that cannot get KV slots stops the queue.
3. **KV blocks are allocated as tokens are computed** (not reserved up front as SGLang's
   model does), a block (``--block-size``; the release's default for the device otherwise:
   16 tokens on CUDA, 128 on CPU) at a time. When a running request cannot get the block
   it needs, the *last* running request is preempted (its KV freed; it goes back to the head
   of the queue and recomputes its prompt and the tokens it already produced), until the
   request fits or is itself the one preempted. A waiting or preempted request is admitted
   only when blocks for its whole sequence so far are free (``--scheduler-reserve-full-isl``,
   on by default), plus ``--watermark`` of the pool while others run: without that gate a
   long prompt admitted on its first chunk took the pool chunk by chunk and preempted the
   decoders, again and again (~50x the preemptions a real vLLM CPU engine counted).
4. **The threshold needs company** (the pinned release's rule, from its engine profile:
   ``SimRules.threshold_needs_company``): at the start of each step vLLM 0.32 counts the
   eligible requests (running + waiting) and applies ``--long-prefill-token-threshold`` only
   when there are more than one: a lone request has nobody to starve and takes the whole
   budget. ``--long-prefill-token-threshold-adaptive`` floors the threshold at
   ``budget // eligible``, counted at the same moment. ``--max-num-partial-prefills`` is no
   flag of any catalogued vLLM release; the argv reader refuses it.
5. **Start-up refusals** (``vllm/config/scheduler.py``, ``verify_max_model_len``): chunked
   prefill off with a token budget below the model length, a budget below ``--max-num-seqs``,
   a threshold above the model length: vLLM refuses to start, and so does the simulator
   (``InputError``), rather than model an engine that never runs (with chunked prefill off
   and a prompt longer than the budget the queue would block for ever).

One step is one forward pass over every scheduled token: its cost is the chunked prefill's
cost plus what the decode rows add (``CostModel.prefill_s`` + ``decode_marginal_s``), or a
decode step's when no prefill ran.
"""

from __future__ import annotations

from tierctl.errors import InputError, Location
from tierctl.sim.config import VLLM_DEFAULT_BLOCK_TOKENS, EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Emission, Live, Round, Scheduler
from tierctl.sim.workload import SimRequest


class VllmScheduler(Scheduler):
    """A discrete-event model of one vLLM (v1 engine) replica's scheduler."""

    def __init__(self, config: EngineConfig, cost: CostModel, seed: int = 0) -> None:
        super().__init__(config, cost, seed)
        self.interval_rounds = 0
        block, _known = kv_block_tokens(config, cost)
        self.block = block
        if config.num_gpu_blocks_override is not None:
            self.kv_pool_tokens = config.num_gpu_blocks_override * block
        else:
            self.kv_pool_tokens = cost.kv_pool_tokens // block * block
        self.reserve_prompt = (
            config.rules.admission_reserves_prompt and config.scheduler_reserve_full_isl
        )
        self.watermark_tokens = int(config.watermark * (self.kv_pool_tokens // block)) * block
        self.max_model_len = config.max_model_len or self.kv_pool_tokens
        self.max_running = config.max_num_seqs or cost.max_running_requests
        self.chunked_prefill = config.enable_chunked_prefill
        budget = config.max_num_batched_tokens
        if budget is None:
            # vLLM's defaults depend on the GPU; the cost model's chunk stands in for them.
            # Without chunked prefill the budget must hold a whole prompt.
            budget = cost.chunked_prefill_size
            if not self.chunked_prefill:
                budget = max(budget, self.max_model_len)
        self.token_budget = budget
        self.rules = config.rules
        _startup_checks(config, budget, self.max_model_len)
        self.threshold = config.long_prefill_token_threshold
        # The threshold in force this step (counted at the step's start, as vLLM does).
        self.step_threshold = self.threshold
        self.host_cache_tokens = 0
        self.cache = self.cache if config.enable_prefix_caching else None
        if config.enable_prefix_caching and self.cache is None:
            from tierctl.sim.prefix_cache import PrefixCache
            from tierctl.traces import BLOCK_TOKENS

            self.cache = PrefixCache(BLOCK_TOKENS)
        self.priority = config.scheduling_policy == "priority"
        # Admitted requests (vLLM's ``running``), in admission order: prefilling and decoding.
        self.order: list[Live] = []
        # This step's tokens scheduled per decoding request (1 + drafts when speculative).
        self._decode_takes: dict[int, int] = {}

    # -- KV blocks ------------------------------------------------------------------------

    def _extra(self, live: Live, tokens: int) -> int:
        """The KV (tokens, whole blocks) ``live`` must newly take to hold ``tokens`` more."""
        b = self.block
        return max(0, -(-(live.kv_slots + tokens) // b) * b - live.kv_tokens)

    def _take(self, live: Live, tokens: int) -> None:
        """Give ``live`` slots for ``tokens`` more tokens (new blocks from the pool)."""
        extra = self._extra(live, tokens)
        live.kv_slots += tokens
        live.kv_tokens += extra
        self.kv_used_tokens += extra

    def _admission_need(self, todo: int, take: int) -> int:
        """The free KV a waiting request needs to be admitted with a ``take``-token chunk of
        its ``todo``: blocks for the whole sequence so far (vLLM's full-sequence gate) or for
        the chunk, plus the watermark while others run."""
        b = self.block
        need = -(-(todo if self.reserve_prompt else take) // b) * b
        return need + (self.watermark_tokens if self.order else 0)

    def _decode_round_extra(self) -> int:
        """The new KV the running decoders take in one decode round (a block each that is
        full)."""
        return sum(self._extra(live, 1) for live in self.running)

    def prefill_budget(self) -> int | None:
        """The step's token budget (``--max-num-batched-tokens``): the most prompt tokens
        one step prefills (without chunking a prompt must fit it whole)."""
        return self.token_budget

    # -- intake -------------------------------------------------------------------------

    def submit(self, req: SimRequest, now_s: float) -> str:
        """Enqueue a request; ``"too_long"`` when prompt plus output exceeds the model length
        or the KV pool (vLLM answers 400)."""
        if req.input_tokens + req.output_tokens > self.max_model_len:
            live = Live(req=req, enqueued_s=now_s, last_token_s=now_s, status="rejected")
            live.reason = f"prompt + output exceed the context (max-model-len {self.max_model_len})"
            self._close(live, now_s)
            return "too_long"
        outcome = super().submit(req, now_s)
        self._order_waiting()
        return outcome

    def _order_waiting(self) -> None:
        """Under ``--scheduling-policy priority`` the waiting queue is vLLM's heap: smaller
        priority first, then earlier arrival (FCFS keeps arrival order, preempted first)."""
        if self.priority and len(self.waiting) > 1:
            ordered = sorted(self.waiting, key=lambda x: (x.req.priority, x.req.arrival_s))
            self.waiting.clear()
            self.waiting.extend(ordered)

    def abort(self, rid: str, now_s: float) -> bool:
        """Drop a request wherever it is; True if it was live."""
        live = self.lives.get(rid)
        if live is not None and live in self.order:
            self.order.remove(live)
            if live.status == "prefilling":
                live.status = "aborted"
                live.reason = "aborted by the client"
                self.kv_used_tokens -= live.kv_tokens
                live.kv_tokens = live.kv_slots = 0
                self._close(live, now_s)
                return True
        return super().abort(rid, now_s)

    @property
    def busy(self) -> bool:
        """Whether a round would do anything besides idling."""
        return bool(self.order or self.waiting)

    def counts(self) -> tuple[int, int]:
        """(running, waiting) as vLLM's gauges count them: prefilling requests are running."""
        return len(self.order), len(self.waiting)

    def prefilling(self) -> int:
        """Admitted requests still computing their prompt."""
        return sum(1 for live in self.order if live.status == "prefilling")

    # -- one step -----------------------------------------------------------------------

    def _threshold_now(self) -> int:
        """The threshold vLLM applies this step: 0 (off) with a lone eligible request, floored
        at the fair share of the budget when adaptive."""
        threshold = self.threshold
        if not threshold:
            return 0
        eligible = len(self.waiting) + len(self.order)
        if self.rules.threshold_needs_company and eligible <= 1:
            return 0
        adaptive = (
            self.rules.threshold_adaptive and self.config.long_prefill_token_threshold_adaptive
        )
        if threshold > 0 and adaptive:
            threshold = max(threshold, self.token_budget // max(1, eligible))
        return threshold

    def _cap(self, tokens: int) -> int:
        threshold = self.step_threshold
        return min(tokens, threshold) if 0 < threshold < tokens else tokens

    def step(self, now_s: float) -> Round | None:
        """Run one engine step starting at ``now_s``; None when there is nothing to do."""
        if not self.busy:
            return None
        self.stats.rounds += 1
        self.step_threshold = self._threshold_now()
        budget = self.token_budget
        decoders: list[Live] = []
        prefills: list[tuple[Live, int]] = []
        preempted = False
        in_burst = any(live.status == "prefilling" for live in self.order)
        i = 0
        while i < len(self.order) and budget > 0:
            live = self.order[i]
            if live.status == "decoding":
                # Under speculative decoding a decoder's draft tokens are scheduled with its
                # sampled one (num_tokens_with_spec), within the budget left.
                take = min(1 + self.spec[0], budget) if self.spec else 1
            else:
                take = min(self._cap(live.extend_tokens - live.prefilled_tokens), budget)
            while self.kv_pool_tokens - self.kv_used_tokens < self._extra(live, take):
                # vLLM 0.32: the last running request, or under the priority policy the
                # lowest-priority one (largest priority, then latest arrival).
                victim = (
                    max(self.order, key=lambda x: (x.req.priority, x.req.arrival_s))
                    if self.priority
                    else self.order[-1]
                )
                if self.order.index(victim) < i:
                    i -= 1  # an earlier request went: the loop's index moves with it
                budget += self._unschedule(victim, decoders, prefills)
                self._preempt(victim, now_s)
                preempted = True
                if victim is live:
                    break
            if live.status in ("waiting",):
                break  # preempted itself: nothing left to free
            if live.status == "decoding":
                decoders.append(live)
                if self.spec:
                    self._decode_takes[id(live)] = take
            else:
                prefills.append((live, take))
            self._take(live, take)
            budget -= take
            i += 1
        if not preempted:
            budget = self._admit_waiting(now_s, budget, prefills)
        if not decoders and not prefills:
            return Round(now_s, self.cost.round_overhead_s, "idle", (), 0, 0)
        return self._run(now_s, decoders, prefills, in_burst)

    def _unschedule(
        self, victim: Live, decoders: list[Live], prefills: list[tuple[Live, int]]
    ) -> int:
        """Take a request preempted after it was scheduled this step back out of the step;
        the budget it had taken (vLLM returns it: ``scheduled_running_reqs``)."""
        if victim in decoders:
            decoders.remove(victim)
            return self._decode_takes.pop(id(victim), 1)
        for k, (live, take) in enumerate(prefills):
            if live is victim:
                del prefills[k]
                return take
        return 0

    def _admit_waiting(self, now_s: float, budget: int, prefills: list[tuple[Live, int]]) -> int:
        while self.waiting and budget > 0 and len(self.order) < self.max_running:
            live = self.waiting[0]
            req = live.req
            cached = 0
            if self.cache is not None and req.block_hashes:
                cached = min(self.cache.match(req.block_hashes), req.input_tokens - 1)
            todo = req.input_tokens + live.resumed_tokens - cached
            take = self._cap(todo)
            if not self.chunked_prefill and take > budget:
                break
            take = min(take, budget)
            free = self.kv_pool_tokens - self.kv_used_tokens
            if self._admission_need(todo, take) > free:
                if live.kv_blocked_since is None:
                    live.kv_blocked_since = now_s
                    self.stats.kv_waits += 1
                break
            if live.kv_blocked_since is not None:
                live.kv_wait_s += now_s - live.kv_blocked_since
                live.kv_blocked_since = None
            self.waiting.popleft()
            if self.cache is not None:
                self.cache.evict_to(free - -(-take // self.block) * self.block)
            if live.admitted_s is None:
                live.admitted_s = now_s
                self.stats.prompt_tokens += req.input_tokens
                self.stats.cached_tokens += cached
            live.cached_tokens = cached
            live.prefilled_tokens = 0
            live.status = "prefilling"
            live.kv_tokens = live.kv_slots = 0
            self._take(live, take)
            self.order.append(live)
            prefills.append((live, take))
            budget -= take
        return budget

    def _run(
        self,
        now_s: float,
        decoders: list[Live],
        prefills: list[tuple[Live, int]],
        in_burst: bool,
    ) -> Round:
        cost = self.cost
        b, k = len(decoders), self.context_tokens
        chunks = tuple(
            (take, live.cached_tokens + live.prefilled_tokens) for live, take in prefills
        )
        if b:
            self.stats.note_decode(b, k)
        if chunks:
            self.stats.prefill_rounds += 1
            self.prefill_epoch += 1
            self.stats.note_prefill(chunks)
            dur = cost.round_overhead_s + self.extend_s(chunks)
            if decoders:
                dur += cost.decode_marginal_s(b, k)
                if self.spec:
                    dur += cost.spec_round_s(b, *self.spec)
            kind = "mixed" if decoders else "prefill"
        else:
            dur = cost.round_overhead_s + self.decode_round_s(b, k)
            kind = "decode"
        dur = self.jittered(dur)
        end = now_s + dur
        emitted: list[Emission] = []
        if decoders and not self.spec:
            emitted += self._decode_tokens(decoders, end, in_burst or bool(chunks))
        elif decoders:
            before = {id(live): live.generated for live in decoders}
            emitted += self._decode_tokens(decoders, end, in_burst or bool(chunks))
            for live in decoders:
                # The slots of the draft tokens rejected are freed: KV keeps what was kept.
                # vLLM keeps the blocks (a later step reuses them): the slots shrink only.
                kept = live.generated - before[id(live)]
                scheduled = self._decode_takes.pop(id(live), 1)
                live.kv_slots += kept - scheduled
        for live, take in prefills:
            live.prefilled_tokens += take
            if live.prefilled_tokens < live.extend_tokens:
                continue
            emitted.append(self._prefill_done(live, end))
        return Round(now_s, dur, kind, chunks, b + len(prefills), k, tuple(emitted))

    def _prefill_done(self, live: Live, end_s: float) -> Emission:
        """The last chunk of a prompt ran: the step samples the request's next token."""
        if live.generated == 0:
            return self._first_token(live, end_s)
        # A preempted request recomputed its prompt and outputs: it decodes on from here.
        live.cached_tokens = 0
        return self._resume_decoding(live, end_s)

    def _preempt(self, live: Live, now_s: float) -> None:
        """Free a running request's KV and put it back at the head of the queue."""
        self.order.remove(live)
        self._free_for_recompute(live)
        live.kv_slots = 0
        self.waiting.appendleft(live)
        self._order_waiting()

    # -- fast-forward (offline only) ----------------------------------------------------

    def decode_only(self, now_s: float) -> bool:
        """True when the next steps are pure decode until a finish or an arrival: nothing is
        prefilling and the queue is empty or its head cannot be scheduled."""
        if not self.running or len(self.order) != len(self.running) or self.spec is not None:
            return False  # speculative steps draw their acceptance: stepped one by one
        b = len(self.running)
        free = self.kv_pool_tokens - self.kv_used_tokens
        growth = self._decode_round_extra()
        if free < growth:
            return False  # the next step preempts
        if not self.waiting:
            return True
        if len(self.order) >= self.max_running or self.token_budget - b <= 0:
            return True
        head = self.waiting[0]
        req = head.req
        cached = 0
        if self.cache is not None and req.block_hashes:
            cached = min(self.cache.match(req.block_hashes, touch=False), req.input_tokens - 1)
        self.step_threshold = self._threshold_now()
        whole = req.input_tokens + head.resumed_tokens - cached
        todo = self._cap(whole)
        room = self.token_budget - b
        if not self.chunked_prefill and todo > room:
            return True
        # Decoding only takes more blocks: a head blocked after this round stays blocked.
        blocked = self._admission_need(whole, min(todo, room)) > free - growth
        if blocked and head.kv_blocked_since is None:
            head.kv_blocked_since = now_s
            self.stats.kv_waits += 1
        return blocked

    def _ff_round_cap(self) -> int:
        """Decode rounds the free blocks hold: each request first fills the block it has,
        then every ``block`` rounds needs one more; ``free // n`` more blocks each are safe."""
        run = self.running
        b = self.block
        room = min(live.kv_tokens - live.kv_slots for live in run)
        free_blocks = (self.kv_pool_tokens - self.kv_used_tokens) // b
        return max(1, room + b * (free_blocks // max(1, len(run))))

    def _ff_account(self, rounds: int) -> None:
        for live in self.running:
            self._take(live, rounds)

    def _finish(self, live: Live, end_s: float) -> None:
        if live in self.order:
            self.order.remove(live)
        live.kv_slots = 0
        super()._finish(live, end_s)


def kv_block_tokens(config: EngineConfig, cost: CostModel) -> tuple[int, bool]:
    """The KV block (tokens) of a vLLM replica and whether it is known: ``--block-size``,
    else the pinned release's default on the cost model's device (its engine profile:
    16 on CUDA, 128 on CPU); with neither, vLLM's CUDA default (16), not known."""
    if config.block_size:
        return config.block_size, True
    default = config.rules.block_tokens(cost.device)
    if default is not None:
        return default, True
    return VLLM_DEFAULT_BLOCK_TOKENS, False


def block_size_note(config: EngineConfig, cost: CostModel) -> str | None:
    """A warning for a pool sized in blocks (``--num-gpu-blocks-override``) whose block is
    not known: on CPU vLLM 0.32 takes 128-token blocks, so the CUDA default of 16 made the
    pool 8x too small (15 of 36 requests dropped). None when the block is known."""
    if config.engine != "vllm" or config.num_gpu_blocks_override is None:
        return None
    block, known = kv_block_tokens(config, cost)
    if known:
        return None
    devices = ", ".join(f"{d} {n}" for d, n in config.rules.kv_block_tokens)
    n = config.num_gpu_blocks_override
    return (
        f"--num-gpu-blocks-override {n}: the KV pool is taken as {n} blocks of {block} tokens "
        f"({n * block:,} tokens), but neither --block-size nor the cost model's device is "
        f"known (cost model {cost.name!r}); the block differs by device (vLLM {config.release}: "
        f"{devices} tokens): give --block-size, or a cost model fitted with "
        "`tierctl sim fit --device`"
    )


def _startup_checks(config: EngineConfig, budget: int, max_model_len: int) -> None:
    """Refuse what the pinned release refuses at start-up (``verify_max_model_len``), in its
    words, naming the flag to change. Sizes the simulator derived (not given) are checked
    only where the engine would derive them too: the budget against the model length."""
    rules = config.rules
    release = f"vLLM {config.release}"

    def refuse(flag: str, value: object, why: str, fix: str) -> InputError:
        return InputError(
            f"{release} refuses to start: {why}",
            location=Location(file="argv", path=flag),
            rule=f"{release}'s start-up check (vllm/config/scheduler.py, verify_max_model_len)",
            value=value,
            fix=fix,
        )

    unchunked = rules.unchunked_budget_holds_model_len and not config.enable_chunked_prefill
    if unchunked and budget < max_model_len:
        raise refuse(
            "--max-num-batched-tokens",
            budget,
            f"max_num_batched_tokens ({budget}) is smaller than max_model_len "
            f"({max_model_len}) with chunked prefill disabled",
            "raise --max-num-batched-tokens to at least --max-model-len, lower "
            "--max-model-len, or enable chunked prefill",
        )
    seqs, given = config.max_num_seqs, config.max_num_batched_tokens
    if rules.budget_holds_max_seqs and seqs is not None and given and given < seqs:
        raise refuse(
            "--max-num-batched-tokens",
            config.max_num_batched_tokens,
            f"max_num_batched_tokens ({config.max_num_batched_tokens}) must be greater "
            f"than or equal to max_num_seqs ({seqs})",
            "raise --max-num-batched-tokens or lower --max-num-seqs",
        )
    threshold = config.long_prefill_token_threshold
    model_len = config.max_model_len
    if rules.threshold_within_model_len and model_len is not None and threshold > model_len:
        raise refuse(
            "--long-prefill-token-threshold",
            threshold,
            f"long_prefill_token_threshold ({threshold}) cannot be greater than the "
            f"max_model_len ({config.max_model_len})",
            "lower --long-prefill-token-threshold",
        )
