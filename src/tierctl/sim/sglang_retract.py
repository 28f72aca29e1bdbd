"""SGLang's admission by ``new_token_ratio`` and its retraction under KV pressure.

Read from the SGLang source (``managers/schedule_policy.py`` ``PrefillAdder``,
``managers/scheduler.py`` ``update_running_batch``, ``managers/schedule_batch.py``
``retract_decode``, ``environ.py``); the constants are the engine profile's
(``SimRules.new_token_ratio``, ``retract_decode_steps``, ``clip_max_new_tokens``):

* **Admission counts outputs at a ratio.** A waiting request is admitted when its uncached
  prompt plus its outputs (clipped to 4096) is less than the free pool minus what the
  running requests are expected to still take: each one's outputs left (clipped) times
  ``new_token_ratio``, plus what the requests admitted earlier in the round take. The prompt
  alone must also fit the free pool. KV slots are then taken as tokens are computed (the
  prompt at admission, one slot per decoded token), not reserved up front.
* **The ratio.** It starts at 0.7 x ``--schedule-conservativeness`` (at most 1) and decays by
  ``(initial - initial x 0.14) / 600`` every decode round that retracts nothing, down to
  ``initial x 0.14``: the longer decoding goes well, the more the scheduler over-commits.
* **Retraction.** Before a decode round, when the free pool cannot hold one new token per
  running request, requests are retracted, the one with the fewest output tokens first (ties:
  the longest prompt first), at least one, until the rest fit; the last one is never
  retracted (if even it does not fit it is aborted, as SGLang aborts it). A retracted
  request's KV is freed and it goes to the back of the waiting queue; on re-admission its
  prompt and its outputs so far are computed again. The ratio is then reset to
  ``(outputs decoded + 20 x requests kept) / (their max new tokens + 1)``, at most 1.

With ``--disable-radix-cache`` the engine admits requests that ignore EOS (what load tests
send) through ``add_one_req_ignore_eos``, which projects every running request to its end;
the model keeps the whole-output reservation of :class:`~tierctl.sim.engine.Scheduler` for
that case (a bound a little more conservative than the projection).

Each retraction counts as a preemption (``SchedulerStats.preemptions``, per request
``Live.preemptions``); the engine exports them as the profile's
``SimRules.metrics_preemption`` family.
"""

from __future__ import annotations

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Emission, Live, Round, Scheduler
from tierctl.sim.workload import SimRequest


class RetractingScheduler(Scheduler):
    """An SGLang replica whose admission over-commits KV by ``new_token_ratio`` and whose
    decode rounds retract requests when the pool runs out."""

    def __init__(self, config: EngineConfig, cost: CostModel, seed: int = 0) -> None:
        super().__init__(config, cost, seed)
        rules = config.rules
        init_ratio, min_factor, decay_rounds = rules.new_token_ratio
        self.init_ratio = min(init_ratio * config.schedule_conservativeness, 1.0)
        self.min_ratio = min(self.init_ratio * min_factor, 1.0)
        self.ratio_decay = (self.init_ratio - self.min_ratio) / max(1, decay_rounds)
        self.new_token_ratio = self.init_ratio
        self.clip = rules.clip_max_new_tokens
        self.retract_steps = rules.retract_decode_steps
        # What the requests admitted so far this round take (prompt + clipped outputs), and
        # their prompts alone (PrefillAdder's rem_total_token_offset / cur_rem_token_offset).
        self._round_total = 0
        self._round_inputs = 0

    def submit(self, req: SimRequest, now_s: float) -> str:
        """Enqueue a request; one whose prompt plus (clipped) outputs reach the whole pool
        can never pass admission (``total >= rem_total``) and is refused, not held."""
        if req.input_tokens + min(req.output_tokens, self.clip) >= self.kv_pool_tokens:
            live = Live(req=req, enqueued_s=now_s, last_token_s=now_s, status="rejected")
            live.reason = f"prompt + output exceed the KV pool ({self.kv_pool_tokens} tokens)"
            self._close(live, now_s)
            return "too_long"
        return super().submit(req, now_s)

    def step(self, now_s: float) -> Round | None:
        """One round; under ``--enable-mixed-chunk`` the running decodes ride along in a
        prefill round, so a pool short of their next tokens retracts first."""
        if (
            self.config.enable_mixed_chunk
            and self.running
            and self.kv_pool_tokens - self.kv_used_tokens < self._slots_next_round(self.running)
        ):
            self._before_decode(now_s)
        return super().step(now_s)

    # -- admission ----------------------------------------------------------------------

    def _build_prefill(self, now_s: float, riders: int) -> tuple[list[tuple[int, int]], list[Live]]:
        self._round_total = 0
        self._round_inputs = 0
        return super()._build_prefill(now_s, riders)

    def _expected(self) -> float:
        """The running requests' outputs still expected, at the current ratio."""
        lives = list(self.running)
        if self.chunked is not None:
            lives.append(self.chunked)
        return sum(
            min(x.req.output_tokens - x.generated, self.clip) * self.new_token_ratio for x in lives
        )

    def _admit(self, live: Live, now_s: float) -> bool:
        req = live.req
        cached = 0
        if self.cache is not None and req.block_hashes:
            cached = min(self.cache.match(req.block_hashes), req.input_tokens - 1)
        extend = req.input_tokens + live.resumed_tokens - cached
        total = extend + min(req.output_tokens - live.generated, self.clip)
        free = self.kv_pool_tokens - self.kv_used_tokens - self.freed_late()[1]
        rem_total = free - self._expected() - self._round_total
        if total >= rem_total or extend > free - self._round_inputs:
            if live.kv_blocked_since is None:
                live.kv_blocked_since = now_s
                self.stats.kv_waits += 1
            return False
        if self.cache is not None:
            self.cache.evict_to(free - extend + self.host_cache_tokens)
        if live.kv_blocked_since is not None:
            live.kv_wait_s += now_s - live.kv_blocked_since
            live.kv_blocked_since = None
        if live.admitted_s is None:
            live.admitted_s = now_s
            self.stats.prompt_tokens += req.input_tokens
            self.stats.cached_tokens += cached
        live.cached_tokens = cached
        live.kv_tokens = extend
        live.status = "prefilling"
        self.kv_used_tokens += extend
        self._round_total += total
        self._round_inputs += extend
        return True

    def _unadmit(self, live: Live) -> None:
        self._round_total -= live.kv_tokens + min(
            live.req.output_tokens - live.generated, self.clip
        )
        self._round_inputs -= live.kv_tokens
        resumed = live.preemptions > 0
        admitted = live.admitted_s
        super()._unadmit(live)
        if resumed:
            # A retracted request was admitted before: its prompt stays counted once.
            live.admitted_s = admitted
            self.stats.prompt_tokens += live.req.input_tokens
            self.stats.cached_tokens += live.cached_tokens

    # -- decode -------------------------------------------------------------------------

    def _first_token(self, live: Live, end_s: float) -> Emission:
        if live.generated == 0:
            return super()._first_token(live, end_s)
        # A retracted request recomputed its prompt and outputs: it decodes on from here.
        return self._resume_decoding(live, end_s)

    def _decode_tokens(self, batch: list[Live], end_s: float, in_burst: bool) -> list[Emission]:
        before = {id(x): x.generated for x in batch}
        out = super()._decode_tokens(batch, end_s, in_burst)
        for x in batch:
            if x.status == "decoding":  # finished ones gave their slots back already
                grown = x.generated - before[id(x)]
                x.kv_tokens += grown
                self.kv_used_tokens += grown
        return out

    def _slots_next_round(self, lives: list[Live]) -> int:
        """KV slots the next decode round takes: one per request (a speculative round may
        keep up to its draft tokens)."""
        per = 1 + (self.spec[0] if self.spec else 0)
        return per * len(lives)

    def _before_decode(self, now_s: float) -> None:
        """``update_running_batch``: retract when the pool cannot hold the round's tokens,
        else let the ratio decay."""
        free = self.kv_pool_tokens - self.kv_used_tokens
        if free >= self._slots_next_round(self.running):
            self.new_token_ratio = max(self.new_token_ratio - self.ratio_decay, self.min_ratio)
            return
        # Fewest outputs kept last, longest prompt last among equals: popped first.
        order = sorted(self.running, key=lambda x: (x.generated, -x.req.input_tokens), reverse=True)
        first = True
        while first or self.kv_pool_tokens - self.kv_used_tokens < self._slots_next_round(order):
            if len(order) == 1:
                break
            first = False
            self._retract(order.pop())
        if self.kv_pool_tokens - self.kv_used_tokens < self._slots_next_round(order):
            last = order.pop()
            self._drop_running(last)
            last.status = "aborted"
            last.reason = "out of KV memory with every other request retracted"
            self._close(last, now_s)
        decoded = sum(x.generated for x in order)
        most = sum(x.req.output_tokens for x in order)
        self.new_token_ratio = min(1.0, (decoded + self.retract_steps * len(order)) / (most + 1))

    def _drop_running(self, live: Live) -> None:
        self.running.remove(live)
        self.context_tokens -= live.req.input_tokens + live.generated
        self.kv_used_tokens -= live.kv_tokens
        live.kv_tokens = 0

    def _retract(self, live: Live) -> None:
        """Free a decoding request's KV and put it at the back of the waiting queue."""
        self._free_for_recompute(live)
        live.cached_tokens = 0
        self.waiting.append(live)

    # -- fast-forward (offline only) ----------------------------------------------------

    def decode_only(self, now_s: float) -> bool:
        """Pure decode until a finish or an arrival, with nothing waiting (a blocked head may
        be admitted as the ratio decays, round by round) and room for every next token."""
        if not self.running or self.chunked is not None or self.spec is not None:
            return False
        if self.kv_pool_tokens - self.kv_used_tokens < len(self.running):
            return False  # the next round retracts
        if self.waiting and self._freed_now[0]:
            return False  # the overlap scheduler's late free lasts one round: stepped
        return not self.waiting or len(self.running) >= self.max_running

    def _ff_round_cap(self) -> int:
        return self._ff_slot_cap()

    def _ff_account(self, rounds: int) -> None:
        self._ff_take_slots(rounds)
        self.new_token_ratio = max(self.new_token_ratio - rounds * self.ratio_decay, self.min_ratio)
