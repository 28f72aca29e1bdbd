"""How much work a simulation is, known before it runs: no option or file makes one run for minutes.

The simulator's time goes to three things, each linear in something a user sets:

* **requests**: each is admitted, scheduled and finished, and each finish ends a
  fast-forwarded decode stretch that touches the whole running batch (about 100 us a request
  on a saturated queue here: a hammer at ``--rate 65536`` for 5 s, 327,680 requests, took 73 s);
* **prefill steps**: a prompt of ``P`` tokens takes ``ceil(P / C)`` steps at a chunk budget
  ``C`` (20,000 prompts of 720K tokens at 16,384 a chunk: 880,000 steps, 24 s);
* **stepped decode rounds**: a model with step jitter, or speculative decoding, steps every
  decode round one by one (no closed form), so its decode work is the output tokens over the
  batch, plus each token's own bookkeeping.

:func:`estimate` counts them from the workload and the arm before anything runs, in *units* of
about one scheduler step's time (a request counts :data:`REQUEST_UNITS`); :func:`check`
refuses an estimate past the bound with the figures and what to do. The bound is
:data:`DEFAULT_MAX_STEPS` units (a run of about 15-30 s on this project's 2-core machine),
or ``TIERCTL_SIM_MAX_STEPS`` in the environment for an operator who wants a longer run. A
command that simulates several runs (``sim compare``'s draws) checks the sum.

The estimate is a lower bound on the work (several prompts can share one step; decode is
counted at full batches), so a refused run would certainly have been long; a run the
estimate lets through that takes longer than estimated is still stopped by the simulator's
own step bound (:func:`runtime_bound`), with its partial result marked ``stopped``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.workload import SimRequest

#: The default bound on one command's simulation work, in units (about one scheduler step).
DEFAULT_MAX_STEPS = 1_000_000

#: Units one request costs beyond its steps (admission, finish, the batch scans): measured
#: 100-120 us a request against 25-30 us a prefill step here.
REQUEST_UNITS = 4

#: Decode tokens per unit of their own bookkeeping in a stepped round (about 1 us a token).
TOKENS_PER_UNIT = 32

#: Units each row of a streamed trace brings with it (a trace's rows are the user's own input,
#: linear work): only what rows amplify beyond this counts against the bound.
ROW_ALLOWANCE = 16

#: What one unit took on this project's 2-core machine (13-22 us measured; the upper end, so
#: the time a refusal names is not an under-estimate).
SECONDS_PER_UNIT = 25e-6

#: The environment variable that raises (or lowers) the bound.
ENV = "TIERCTL_SIM_MAX_STEPS"

#: The simulator's own step bound is this many times the work bound: a backstop for a run
#: whose work the estimate under-counts (retraction, preemption, deferred rounds).
RUNTIME_FACTOR = 4


def limit() -> int:
    """The bound in force: ``TIERCTL_SIM_MAX_STEPS`` when set (a positive integer), else
    :data:`DEFAULT_MAX_STEPS`.

    Raises:
        InputError: the variable is set to something that is not a positive integer.
    """
    raw = os.environ.get(ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_STEPS
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise InputError(
            f"{ENV} is not a positive whole number",
            rule="the simulation work bound is a number of scheduler steps above 0",
            value=raw[:40],
            fix=f"unset {ENV} (default {DEFAULT_MAX_STEPS:,}) or set it to e.g. 5000000",
        )
    return value


def runtime_bound(max_steps: int | None = None) -> int:
    """The scheduler loops one simulation may run before it stops itself (a backstop)."""
    return RUNTIME_FACTOR * (limit() if max_steps is None else max_steps)


@dataclass(frozen=True)
class WorkEstimate:
    """What a simulation will do, counted before it runs (lower bounds)."""

    requests: int = 0
    prefill_steps: int = 0
    decode_rounds: int = 0
    decode_tokens: int = 0
    runs: int = 1
    count_requests: bool = True

    @property
    def units(self) -> int:
        """The work, in units of about one scheduler step, over every run."""
        one = self.prefill_steps + self.decode_rounds + self.decode_tokens // TOKENS_PER_UNIT
        if self.count_requests:
            one += REQUEST_UNITS * self.requests
        return self.runs * one

    def times(self, runs: int) -> WorkEstimate:
        """The same work done ``runs`` times (a comparison's draws)."""
        return WorkEstimate(
            self.requests, self.prefill_steps, self.decode_rounds, self.decode_tokens,
            self.runs * max(1, runs), self.count_requests,
        )  # fmt: skip

    def plus(self, other: WorkEstimate) -> WorkEstimate:
        """Both estimates' work together, as one run's figures (each side's runs summed)."""
        a, b = self, other
        return WorkEstimate(
            a.requests * a.runs + b.requests * b.runs,
            a.prefill_steps * a.runs + b.prefill_steps * b.runs,
            a.decode_rounds * a.runs + b.decode_rounds * b.runs,
            a.decode_tokens * a.runs + b.decode_tokens * b.runs,
            1,
            a.count_requests or b.count_requests,
        )

    def describe(self) -> str:
        """The figures, in words."""
        parts = [f"{self.requests:,} requests"] if self.count_requests else []
        if self.prefill_steps or not parts:
            parts.append(f"{self.prefill_steps:,} prefill steps")
        if self.decode_rounds:
            parts.append(f"{self.decode_rounds:,} decode rounds stepped one by one")
        text = ", ".join(parts)
        return f"{text}, {self.runs:,} simulated runs" if self.runs > 1 else text


class Meter:
    """One arm's terms: its prefill budget, batch and tokens a decode round can give, and
    whether decode rounds are stepped one by one. Built once per arm."""

    def __init__(self, config: EngineConfig, model: CostModel, *, stepped: bool | None = None):
        from tierctl.sim.engine import make_scheduler

        sched = make_scheduler(config, model)
        budget = sched.prefill_budget()
        self.chunk = budget if budget and budget > 0 else None
        self.batch = max(1, int(sched.max_running or 1))
        spec = sched.spec
        # A speculative round gives a sequence at most its draft tokens plus one.
        self.per_round = self.batch * (1 if spec is None else max(1, spec[1]))
        self.stepped = (model.jittery or spec is not None) if stepped is None else stepped
        # A request that can never fit is refused at submit: it costs its request units only.
        self.fits = int(
            min(sched.kv_pool_tokens, getattr(sched, "max_model_len", sched.kv_pool_tokens))
        )

    def of(self, requests: Iterable[SimRequest], *, count_requests: bool = True) -> WorkEstimate:
        """The work of ``requests`` on this arm: lower bounds where no prefix is shared.

        Prefill steps are the prompt tokens over the step's budget (every prompt token
        computed: a prefix cache computes fewer), decode rounds the tokens after each first
        one over what one round can give (a full batch, every draft accepted); a request
        that can never fit the KV pool (or vLLM's context) is refused at once and counts
        only as a request.
        """
        tally = WorkTally(self)
        for r in requests:
            tally.add(r)
        return tally.estimate(count_requests=count_requests)


class WorkTally:
    """Running counts of the requests charged to one arm's :class:`Meter` (a streamed trace
    adds its rows one at a time; :meth:`Meter.of` adds a whole workload)."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.requests = self.prompt = self.out = 0

    def add(self, r: SimRequest) -> None:
        """Charge one request (one that can never fit counts only as a request)."""
        self.requests += 1
        if r.input_tokens + r.output_tokens <= self.meter.fits:
            self.prompt += max(1, r.input_tokens)
            self.out += max(0, r.output_tokens - 1)

    def estimate(self, *, count_requests: bool = True) -> WorkEstimate:
        """The work charged so far."""
        m = self.meter
        prefill = 0 if m.chunk is None else -(-self.prompt // m.chunk)
        rounds = -(-self.out // m.per_round) if m.stepped else 0
        tokens = self.out if m.stepped else 0
        return WorkEstimate(self.requests, prefill, rounds, tokens, 1, count_requests)


def estimate(
    config: EngineConfig, requests: Iterable[SimRequest], model: CostModel, *, runs: int = 1
) -> WorkEstimate:
    """The work of simulating ``requests`` on ``config`` ``runs`` times."""
    return Meter(config, model).of(requests).times(runs)


def check(est: WorkEstimate, max_steps: int | None = None, *, what: str = "the simulation") -> None:
    """Refuse ``est`` when it is past the bound (:func:`limit` unless ``max_steps``).

    Raises:
        InputError: with the estimate, the bound and the ways out.
    """
    bound = limit() if max_steps is None else max_steps
    if est.units <= bound:
        return
    raise InputError(
        f"{what} is too large to run: about {est.units:,} scheduler steps "
        f"({est.describe()}), past the bound of {bound:,}",
        rule="one command simulates at most the bound's scheduler steps (about 15-30 s of CPU "
        f"at the default {DEFAULT_MAX_STEPS:,}), so no workload or flag runs for minutes",
        value=f"{est.units:,} steps",
        fix="simulate a shorter workload (fewer requests, a lower rate or duration, shorter "
        "prompts or outputs), fewer draws, or raise the bound for this command: "
        f"{ENV}={_suggest(est.units)} (about {math.ceil(est.units * SECONDS_PER_UNIT):,} s here)",
    )


def _suggest(units: int) -> str:
    """A round bound just above ``units``."""
    digits = max(0, len(str(units)) - 2)
    step = 10**digits
    return str(-(-units // step) * step)


__all__ = [
    "DEFAULT_MAX_STEPS",
    "ENV",
    "ROW_ALLOWANCE",
    "Meter",
    "WorkEstimate",
    "WorkTally",
    "check",
    "estimate",
    "limit",
    "runtime_bound",
]
