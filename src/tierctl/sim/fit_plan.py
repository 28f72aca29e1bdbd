"""A fit workload that covers the question (``tierctl sim fit-plan``).

A cost model answers for the step shapes its fit saw. Before a what-if, ``fit_plan``
simulates both arms on the workload of the question, takes the largest shapes either will
produce (:class:`~tierctl.sim.domain.StepDomain`), and designs a fit run that spans them:

* the engine for the fit runs with the larger token budget and sequence limit of the two arms
  (a fit at a 512-token budget never sees a 2,048-token step);
* a **ladder** of lone prompts, log-spaced in length up to the deepest prompt either arm
  prefills, each arriving once the one before has finished (so each is chunked at the full
  budget, at every depth: the attention term needs the depths);
* **batches** of 1, 2, 4 ... up to the largest decode batch, each sized so that together they
  reach the largest decode context, arriving together once the engine is idle;
* a **second run** of the ladder at the smallest arm's budget when the first run's cannot
  reproduce that arm's deep chunks (``FitPlan.more_runs``): at a 4,096-token budget every
  prompt that fits a 4,096-token context is one step, so the 512-token arm's chunks 2,560
  tokens deep never occur in it. ``sim fit --from vllm-log`` fits the runs together, each
  replayed at its own budget (:func:`tierctl.sim.fitting.fit_vllm_log`'s ``more_runs``).

It is a trace in tierctl's JSONL format for ``tierctl bench run --trace`` against the engine
started with the printed argv (with ``--enable-logging-iteration-details`` on vLLM), whose log
and results ``sim fit --from vllm-log --timings`` then fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tierctl.engines import profile_for
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.domain import StepDomain
from tierctl.sim.engine import make_scheduler
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload


def _limit_flags(kind: str) -> tuple[str, str]:
    """The engine's budget and sequence-limit flags (its profile's): the fit runs at the
    larger arm's."""
    profile = profile_for(kind)
    return f"--{profile.token_budget_flag}", f"--{profile.max_running_flag}"


@dataclass(frozen=True)
class FitPlan:
    """What to run for a fit that covers both arms of a what-if."""

    domain: StepDomain  # the largest shapes either arm produces
    budget_tokens: int  # the fit engine's token budget (the larger arm's)
    max_running: int  # the fit engine's sequence limit (the larger arm's)
    argv_flags: tuple[str, ...]  # flags to add to the fit engine's argv
    workload: Workload  # the fit trace
    # Further runs, each (flags to add, trace): the ladder again at a smaller arm's budget
    # when the fit engine's budget cannot cut a prompt into that arm's deep chunks (the
    # prompt would have to be longer than the model's context).
    more_runs: tuple[tuple[tuple[str, ...], Workload], ...] = ()


def fit_plan(
    control: EngineConfig, candidate: EngineConfig, workload: Workload, cost: CostModel
) -> FitPlan:
    """Design a fit run spanning the step shapes both arms produce on ``workload``."""
    return fit_plan_cover([control, candidate], [workload], cost, fit_argv=candidate)


def fit_plan_cover(
    arms: Sequence[EngineConfig],
    workloads: Sequence[Workload],
    cost: CostModel,
    *,
    fit_argv: EngineConfig | None = None,
) -> FitPlan:
    """One fit run spanning the step shapes every arm produces on every workload (a what-if
    study with several flag changes fits one model for all of them).

    ``fit_argv`` (default: the first arm) is the engine the fit runs, with the largest token
    budget and sequence limit of the arms added to it.
    """
    if not arms:
        raise ValueError("fit_plan_cover needs at least one arm")
    domain = StepDomain()
    for cfg in arms:
        for workload in workloads:
            seen = StepDomain.from_json(simulate(cfg, workload, cost).domain) or StepDomain()
            domain = domain.union(seen)
    budget, running = 0, 0
    for cfg in arms:
        sched = make_scheduler(cfg, cost)
        size = getattr(sched, "token_budget", None) or sched.chunk_tokens or budget
        budget = max(budget, size)
        running = max(running, sched.max_running)
    base = fit_argv or arms[0]
    flag_budget, flag_running = _limit_flags(base.engine)
    flags = (flag_budget, str(budget), flag_running, str(running))
    fit_cfg = EngineConfig.from_argv([*base.argv, *flags], engine=base.engine, version=base.release)
    limit = fit_cfg.max_prompt_tokens
    cap = None if limit is None else limit - _LADDER_OUTPUT
    reqs = _ladder(domain, budget, cap) + _batches(domain, max(1, min(domain.batch, running)))
    trace = _spaced(reqs, fit_cfg, cost)
    seen = StepDomain.from_json(simulate(fit_cfg, trace, cost).domain) or StepDomain()
    more: list[tuple[tuple[str, ...], Workload]] = []
    if any(line.startswith("chunks") for line in domain.beyond(seen)):
        # The ladder again on the arm with the smallest budget (its own argv: another arm's
        # might not start at that budget, e.g. chunked prefill off).
        small_arm = min(arms, key=lambda c: _budget_of(c, cost, budget))
        size = _budget_of(small_arm, cost, budget)
        if size < budget:
            small = (flag_budget, str(size), flag_running, str(running))
            small_cfg = EngineConfig.from_argv(
                [*small_arm.argv, *small], engine=small_arm.engine, version=small_arm.release
            )
            more.append((small, _spaced(_ladder(domain, size, cap), small_cfg, cost)))
    return FitPlan(domain, budget, running, flags, trace, tuple(more))


_LADDER_OUTPUT = 16  # output tokens of each ladder prompt


def _budget_of(cfg: EngineConfig, cost: CostModel, default: int) -> int:
    """An arm's token budget per step (vLLM's scheduler; ``default`` for one without)."""
    return getattr(make_scheduler(cfg, cost), "token_budget", None) or default


def _ladder(domain: StepDomain, budget: int, limit: int | None = None) -> list[SimRequest]:
    """Lone prompts, log-spaced from 64 tokens to the deepest prompt prefilled (at most
    ``limit``: the engine refuses a prompt past its context, ``--max-model-len`` on vLLM)."""
    longest = max(64, domain.position + max(domain.step_tokens, budget))
    if limit is not None:
        longest = max(64, min(longest, limit))
    n = max(2, math.ceil(math.log2(longest / 64)) * 2)
    lengths = sorted({round(64 * (longest / 64) ** (i / (n - 1))) for i in range(n)})
    return [
        SimRequest(f"ladder-{i}", 0.0, length, _LADDER_OUTPUT) for i, length in enumerate(lengths)
    ]


def _batches(domain: StepDomain, biggest: int) -> list[SimRequest]:
    """Batches of 1, 2, 4 ... ``biggest`` requests whose contexts reach the largest seen."""
    per = max(64, domain.context // max(1, domain.batch))
    out: list[SimRequest] = []
    size = 1
    while True:
        size = min(size, biggest)
        out += [SimRequest(f"batch{size}-{j}", 0.0, per, 64) for j in range(size)]
        if size >= biggest:
            return out
        size *= 2


def _spaced(reqs: list[SimRequest], cfg: EngineConfig, cost: CostModel) -> Workload:
    """Each ladder prompt, and each batch as a group, sent once the previous has finished
    (as the simulator predicts it, plus a half), so the fit sees them on an idle engine."""
    groups: list[list[SimRequest]] = []
    for r in reqs:
        key = r.rid.rsplit("-", 1)[0]
        if groups and groups[-1][0].rid.rsplit("-", 1)[0] == key and key != "ladder":
            groups[-1].append(r)
        else:
            groups.append([r])
    t = 0.0
    out: list[SimRequest] = []
    for group in groups:
        placed = [dataclasses.replace(r, arrival_s=round(t, 3)) for r in group]
        out += placed
        alone = simulate(
            cfg, Workload.of("g", [dataclasses.replace(r, arrival_s=0.0) for r in group]), cost
        )
        t += 1.5 * max(alone.sim_end_s, 0.05)
    return Workload.of("fit-plan", out)
