"""Offline simulation: run a workload through the scheduler model in simulated time."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tierctl.latency import percentile
from tierctl.sim import budget
from tierctl.sim.config import EngineConfig, step_cost_differences, unmodelled_differences
from tierctl.sim.cost import CostModel, preset
from tierctl.sim.disagg_config import ArmConfig, DisaggTier, arm_flags
from tierctl.sim.engine import Round, Scheduler, itl_quantile, make_scheduler
from tierctl.sim.host import has_host_costs, plan_host, probe_latencies, tokenizes_on_loop
from tierctl.sim.result import RatioRow, RequestResult, SimResult, ratio_table, summarize_results
from tierctl.sim.workload import SimRequest, Workload

#: The most scheduler steps one simulation runs when the caller gives no bound of its own: the
#: backstop behind the work estimate (:mod:`tierctl.sim.budget`), whose default bound it is
#: four times; pure-decode stretches run in closed form and count one each.
MAX_STEPS = budget.RUNTIME_FACTOR * budget.DEFAULT_MAX_STEPS


def _with_host_wait(r: RequestResult, arrived: dict[str, float]) -> RequestResult:
    """Times from the request's arrival at the server, not from reaching the scheduler."""
    t0 = arrived.get(r.rid, r.arrival_s)
    wait = r.arrival_s - t0
    if wait <= 0:
        return r

    def add(v: float | None) -> float | None:
        return None if v is None else v + wait

    return dataclasses.replace(
        r, arrival_s=t0, ttft_s=add(r.ttft_s), e2e_s=add(r.e2e_s), queue_s=add(r.queue_s)
    )


def probe_figures(latencies: list[float], timeout_s: float) -> dict[str, Any]:
    """Probe p99, worst and misses (slower than the time-out), for the summary."""
    if not latencies:
        return {}
    return {
        "probes": len(latencies),
        "probe_p99_s": percentile(latencies, 99),
        "probe_max_s": max(latencies),
        "probe_misses": sum(x > timeout_s for x in latencies),
        "unhealthy_flips": _flips(latencies, timeout_s),
    }


def _flips(latencies: list[float], timeout_s: float, misses_to_mark: int = 3) -> int:
    """Times a proxy marking a backend unhealthy after ``misses_to_mark`` consecutive misses
    would have done so (each one later recovers or the run ends)."""
    flips = run = 0
    for x in latencies:
        run = run + 1 if x > timeout_s else 0
        flips += run == misses_to_mark
    return flips


def simulate(
    config: ArmConfig,
    workload: Workload,
    cost: CostModel | str = "glm53-flash-w4afp8-tp4-h200",
    *,
    seed: int = 0,
    fast_forward: bool = True,
    horizon_s: float = math.inf,
    steps: list[Round] | None = None,
    probe_interval_s: float = 5.0,
    probe_timeout_s: float = 3.0,
    progress: Callable[[float], None] | None = None,
    max_steps: int | None = None,
    check_work: bool = True,
) -> SimResult:
    """Simulate ``workload`` on one replica configured by ``config``.

    The scheduler model is deterministic: the same inputs give the same result. ``seed``
    draws the steps' jitter when the cost model has any (``CostModel.step_jitter``; 0 in the
    presets, where results do not depend on it); workload generators take their own seeded
    generator.

    Args:
        config: the replica's engine flags (see :meth:`EngineConfig.from_argv`), or a
            disaggregated prefill and decode pool (:mod:`tierctl.sim.disagg`; the step
            options below other than ``seed`` and ``max_steps`` apply to one replica only).
        workload: the requests, in arrival order.
        cost: a cost model or a preset name.
        seed: draws the step jitter of a cost model that has one.
        fast_forward: run pure-decode stretches in closed form (same results, faster).
        horizon_s: stop at this simulated time; requests still in flight are "unfinished".
        steps: when given, every stepped round is appended (for ``sim fit`` round trips).
        probe_interval_s: a proxy's health probe period, for the probe figures (host costs).
        probe_timeout_s: the probe time-out: a slower answer counts as a miss.
        progress: called now and then with the simulated time reached (for a progress bar;
            the simulation itself never draws anything).
        max_steps: a hard bound on the scheduler steps; past it the simulation stops, the
            requests in flight are unfinished and ``SimResult.stopped`` says why (default:
            :func:`tierctl.sim.budget.runtime_bound`, four times the work bound).
        check_work: refuse up front a workload whose estimated work is past the bound
            (:mod:`tierctl.sim.budget`; a caller that checked the sum of several runs passes
            False).

    Raises:
        InputError: the simulation's estimated work is past the bound (``check_work``).
    """
    model = preset(cost) if isinstance(cost, str) else cost
    if max_steps is None:
        max_steps = budget.runtime_bound()
    if check_work:
        # A disaggregated arm's prompts are prefilled by its prefill pool: that pool's work.
        arm = config.prefill[0] if isinstance(config, DisaggTier) else config
        budget.check(budget.estimate(arm, workload.requests, model))
    if isinstance(config, DisaggTier):
        from tierctl.sim.disagg import simulate_disagg

        return simulate_disagg(config, workload, model, seed=seed, max_steps=max_steps)
    sched = make_scheduler(config, model, seed, ranks=True)
    host = plan_host(workload.requests, model, tokenizes_on_loop(config))
    if has_host_costs(model):
        # Requests reach the scheduler when the host is done with them (FIFO: still ordered).
        reqs = tuple(
            dataclasses.replace(r, arrival_s=t)
            for r, t in zip(workload.requests, host.ready_s, strict=True)
        )
    else:
        reqs = workload.requests
    now, stopped = _run(sched, reqs, model, horizon_s, fast_forward, steps, progress, max_steps)
    lives = [*sched.done, *sched.lives.values()]
    arrived = {r.rid: r.arrival_s for r in workload.requests}
    results = tuple(
        sorted(
            (_with_host_wait(RequestResult.of(x), arrived) for x in lives),
            key=lambda r: (r.arrival_s, r.rid),
        )
    )
    hist = sched.stats.itl_hist
    probes = (
        probe_latencies(host, now, probe_interval_s, model.request_overhead_s)
        if has_host_costs(model)
        else []
    )
    summary = summarize_results(
        list(results), sched.stats.kv_waits, (itl_quantile(hist, 0.5), itl_quantile(hist, 0.99))
    )
    summary = dataclasses.replace(summary, **probe_figures(probes, probe_timeout_s))
    return SimResult(
        workload=workload.name,
        preset=model.name,
        argv=config.argv,
        requests=results,
        summary=summary,
        rounds=sched.stats.rounds,
        prefill_rounds=sched.stats.prefill_rounds,
        deferred_rounds=sched.stats.deferred_rounds,
        sim_end_s=now,
        stopped=stopped,
        domain=sched.stats.domain().to_json(),
    )


def _run(
    sched: Scheduler,
    reqs: tuple[SimRequest, ...],
    model: CostModel,
    horizon_s: float,
    fast_forward: bool,
    steps: list[Round] | None,
    progress: Callable[[float], None] | None,
    max_steps: int,
) -> tuple[float, str]:
    """Drive the scheduler until the workload is done or ``horizon_s``; the time reached, and
    why it stopped early ("" when it did not)."""
    nxt = 0
    now = 0.0
    loops = 0
    while now < horizon_s:
        loops += 1
        if loops > max_steps:
            return now, (
                f"stopped after {max_steps:,} scheduler steps at {now:,.1f} simulated s "
                "(the bound on one simulation); the requests in flight are unfinished"
            )
        if progress is not None and loops % 2048 == 0:
            progress(now)
        while nxt < len(reqs) and reqs[nxt].arrival_s <= now:
            sched.submit(reqs[nxt], now)
            nxt += 1
        upcoming = reqs[nxt].arrival_s if nxt < len(reqs) else math.inf
        if not sched.busy:
            if upcoming == math.inf:
                break
            sched.idle(upcoming - now)
            now = upcoming
            continue
        if fast_forward and steps is None:
            spun = sched.spin_deferred(now)
            if spun is not None:
                now = spun
                continue
        # Jittered steps have no closed form: they are stepped one by one.
        if fast_forward and steps is None and not model.jittery and sched.decode_only(now):
            now, _ = sched.fast_forward(now, min(upcoming, horizon_s))
            continue
        deferred = sched.stats.deferred_rounds
        rnd = sched.step(now)
        assert rnd is not None
        if steps is not None:
            steps.append(rnd)
        now += rnd.duration_s
        if rnd.kind == "idle" and sched.stats.deferred_rounds == deferred and not sched.countdown:
            # Nothing ran and nothing is armed: the scheduler's state can change only when a
            # request arrives, so idling round by round until then would be the same rounds
            # over again (or, with no arrival left, for ever).
            if upcoming == math.inf:
                return now, (
                    f"the scheduler could schedule none of the {len(sched.waiting)} waiting "
                    "request(s) and nothing was running: they are unfinished"
                )
            sched.idle(upcoming - now)
            now = max(now, upcoming)
    return now, ""


@dataclass(frozen=True)
class Comparison:
    """Two runs of one workload and their ratio table (candidate / control)."""

    control: SimResult
    candidate: SimResult
    table: tuple[RatioRow, ...]
    focus: str | None
    # Flags that differ between the arms and that the model does not read: the table is
    # blind to them, so a ratio of 1.00 says nothing about their effect.
    not_modelled: tuple[str, ...] = ()
    # Flags that differ and change a step's cost, which the cost model holds fixed.
    step_cost: tuple[str, ...] = ()


def compare(
    control: ArmConfig,
    candidate: ArmConfig,
    workload: Workload,
    cost: CostModel | str = "glm53-flash-w4afp8-tp4-h200",
    *,
    focus: str | None = None,
    seed: int = 0,
) -> Comparison:
    """Run both configurations on the identical workload; ``focus`` limits the table to
    requests whose id starts with it (e.g. ``dec`` for the sequences decoding during a burst).
    Both arms draw step jitter (if the cost model has any) from the same ``seed``.
    """
    a = simulate(control, workload, cost, seed=seed)
    b = simulate(candidate, workload, cost, seed=seed)
    sa = a.subset(focus) if focus else a.summary
    sb = b.subset(focus) if focus else b.summary
    ca, cb = arm_flags(control), arm_flags(candidate)
    blind = tuple(unmodelled_differences(ca, cb))
    costly = tuple(step_cost_differences(ca, cb))
    model = preset(cost) if isinstance(cost, str) else cost
    costly += tuple(n for n in _speculation_unpriced(ca, cb, model) if n not in costly)
    return Comparison(a, b, ratio_table(sa, sb), focus, blind, costly)


def _speculation_unpriced(
    control: EngineConfig, candidate: EngineConfig, cost: CostModel
) -> list[str]:
    """The speculative-decoding flag, when the arms differ in it and the cost model has no
    acceptance (``spec_accept_rate`` 0: the simulator then decodes one token a round, so the
    ratio would be a silent 1.00 for a change that moves every decode step)."""
    if cost.spec_accept_rate > 0 or cost.spec_accept_by_position:
        return []
    fa, fb = control.flag_map(), candidate.flag_map()
    names = ("speculative-config", "speculative-algorithm")
    return [n for n in names if fa.get(n) != fb.get(n)]
