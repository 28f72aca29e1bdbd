"""SGLang's DP attention: one scheduler per rank, one global step (``--enable-dp-attention``).

With ``--enable-dp-attention --dp-size D`` an SGLang replica runs D attention ranks, each
with its own scheduler, waiting queue, running batch and KV pool; the MoE layers between them
run over every rank's tokens at once, so the ranks step in lockstep. What the model keeps,
from the SGLang 0.5.23 wheel:

* **Dispatch**: the data-parallel controller hands requests to ranks round robin (the
  ``--load-balance-method`` default ``auto`` is round robin without PD disaggregation:
  ``arg_groups/serving_hook.py``).
* **The global step**: every rank schedules its own batch (a prefill chunk, a decode batch,
  or an idle dummy batch); the step ends when the slowest rank's does (the MoE all-to-all is
  a barrier), so a rank that only decodes waits for a rank's chunk. Each rank's tokens are
  stamped at its own batch's end; its next step starts at the global step's end, so the wait
  lands in the next gap, where ITL and TPOT see it.
* **The interval is armed globally**: ``_arm_prefill_decode_interval`` reads the ranks'
  synchronised ``is_extend_in_batch`` under DP attention (``managers/scheduler.py``,
  ``require_mlp_sync``), so when any rank runs an extend batch every rank's countdown is
  armed, and a rank with no prefill of its own defers its admissions too (SGLang #35017).
  The engine profile's ``SimRules.interval_global_under_dp`` says whether the pinned release
  does so.

The cost model prices one rank's step. Offline only: ``sim serve`` runs one scheduler.
"""

from __future__ import annotations

import dataclasses

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Emission, Round, Scheduler, make_scheduler
from tierctl.sim.workload import SimRequest


class DpAttentionScheduler(Scheduler):
    """D SGLang rank schedulers stepping together; the interface of one :class:`Scheduler`."""

    def __init__(self, config: EngineConfig, cost: CostModel, seed: int = 0) -> None:
        super().__init__(config, cost, seed)
        one = dataclasses.replace(config, enable_dp_attention=False, dp_size=1)
        self.ranks = [make_scheduler(one, cost, seed * 131 + r) for r in range(config.dp_size)]
        self._next = 0
        self.global_interval = config.rules.interval_global_under_dp

    # -- intake: round robin ------------------------------------------------------------

    def submit(self, req: SimRequest, now_s: float) -> str:
        """Hand the request to the next rank, round robin."""
        rank = self.ranks[self._next]
        self._next = (self._next + 1) % len(self.ranks)
        outcome = rank.submit(req, now_s)
        self._gather_requests()
        return outcome

    def abort(self, rid: str, now_s: float) -> bool:
        """Drop a request on whichever rank holds it."""
        return any(rank.abort(rid, now_s) for rank in self.ranks)

    @property
    def busy(self) -> bool:
        """Whether any rank has work."""
        return any(rank.busy for rank in self.ranks)

    def counts(self) -> tuple[int, int]:
        """(running, waiting) over all ranks."""
        pairs = [rank.counts() for rank in self.ranks]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def idle(self, elapsed_s: float) -> None:
        """Idle rounds drain every rank's countdown."""
        for rank in self.ranks:
            rank.idle(elapsed_s)

    def spin_deferred(self, now_s: float) -> float | None:
        """Never spun as one: the ranks' countdowns move together, step by step."""
        return None

    def decode_only(self, now_s: float) -> bool:
        """Never fast-forwarded: a rank's decode waits on the others' steps."""
        return False

    # -- one global step ----------------------------------------------------------------

    def step(self, now_s: float) -> Round | None:
        """Every rank runs its batch; the step lasts as long as the slowest rank's."""
        if not self.busy:
            return None
        rounds = [rank.step(now_s) for rank in self.ranks]
        for rank, rnd in zip(self.ranks, rounds, strict=True):
            if rnd is None and rank.countdown > 0:
                rank.countdown -= 1  # an idle rank's loop still runs the deferral check
        ran = [r for r in rounds if r is not None]
        extend = any(r.kind in ("prefill", "mixed") for r in ran)
        if extend and self.global_interval and self.config.prefill_decode_interval:
            # is_extend_in_batch is global: every rank arms its countdown.
            for rank in self.ranks:
                rank.countdown = self.config.prefill_decode_interval
        self.countdown = max(rank.countdown for rank in self.ranks)
        self._gather()
        dur = max((r.duration_s for r in ran), default=self.cost.round_overhead_s)
        kinds = {r.kind for r in ran}
        kind = next((k for k in ("mixed", "prefill", "decode") if k in kinds), "idle")
        emitted: tuple[Emission, ...] = tuple(e for r in ran for e in r.emitted)
        chunks = tuple(c for r in ran for c in r.chunks)
        return Round(
            now_s,
            dur,
            kind,
            chunks,
            sum(r.batch_size for r in ran),
            sum(r.context_tokens for r in ran),
            emitted,
        )

    def _gather(self) -> None:
        """The ranks' state, seen as one replica's (what the simulation reads back)."""
        st = self.stats
        ranks = [rank.stats for rank in self.ranks]
        st.rounds += 1
        st.prefill_rounds = max(r.prefill_rounds for r in ranks)
        st.deferred_rounds = max(r.deferred_rounds for r in ranks)
        st.kv_waits = sum(r.kv_waits for r in ranks)
        st.prompt_tokens = sum(r.prompt_tokens for r in ranks)
        st.cached_tokens = sum(r.cached_tokens for r in ranks)
        st.preemptions = sum(r.preemptions for r in ranks)
        st.recomputed_tokens = sum(r.recomputed_tokens for r in ranks)
        st.spec_drafts = sum(r.spec_drafts for r in ranks)
        width = max((len(r.spec_accepted_by_position) for r in ranks), default=0)
        st.spec_accepted_by_position = [
            sum(
                r.spec_accepted_by_position[k]
                for r in ranks
                if k < len(r.spec_accepted_by_position)
            )
            for k in range(width)
        ]
        st.itl_hist = [sum(col) for col in zip(*(r.itl_hist for r in ranks), strict=True)]
        st.max_step_tokens = max(r.max_step_tokens for r in ranks)
        st.max_position = max(r.max_position for r in ranks)
        st.max_batch = max(r.max_batch for r in ranks)
        st.max_context = max(r.max_context for r in ranks)
        self._gather_requests()

    def _gather_requests(self) -> None:
        self.lives = {k: v for rank in self.ranks for k, v in rank.lives.items()}
        self.done = [live for rank in self.ranks for live in rank.done]
        self.waiting.clear()
        for rank in self.ranks:
            self.waiting.extend(rank.waiting)
