"""Offline simulation: run a workload through the scheduler model in simulated time."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tierctl.sim.config import EngineConfig, unmodelled_differences
from tierctl.sim.cost import CostModel, preset
from tierctl.sim.engine import Round, itl_quantile, make_scheduler
from tierctl.sim.result import RatioRow, RequestResult, SimResult, ratio_table, summarize
from tierctl.sim.workload import Workload


def simulate(
    config: EngineConfig,
    workload: Workload,
    cost: CostModel | str = "glm53-flash-w4afp8-tp4-h200",
    *,
    seed: int = 0,
    fast_forward: bool = True,
    horizon_s: float = math.inf,
    steps: list[Round] | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Simulate ``workload`` on one replica configured by ``config``.

    The scheduler model is deterministic, so ``seed`` only names the run (workload
    generators take their own seeded generator); it is kept for API symmetry with the
    server and recorded nowhere else.

    Args:
        config: the replica's engine flags (see :meth:`EngineConfig.from_argv`).
        workload: the requests, in arrival order.
        cost: a cost model or a preset name.
        seed: reserved; results do not depend on it.
        fast_forward: run pure-decode stretches in closed form (same results, faster).
        horizon_s: stop at this simulated time; requests still in flight are "unfinished".
        steps: when given, every stepped round is appended (for ``sim fit`` round trips).
        progress: called now and then with the simulated time reached (for a progress bar;
            the simulation itself never draws anything).
    """
    del seed
    model = preset(cost) if isinstance(cost, str) else cost
    sched = make_scheduler(config, model)
    reqs = workload.requests
    nxt = 0
    now = 0.0
    loops = 0
    while now < horizon_s:
        loops += 1
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
        if fast_forward and steps is None and sched.decode_only(now):
            now, _ = sched.fast_forward(now, min(upcoming, horizon_s))
            continue
        rnd = sched.step(now)
        assert rnd is not None
        if steps is not None:
            steps.append(rnd)
        now += rnd.duration_s
    lives = [*sched.done, *sched.lives.values()]
    results = tuple(
        sorted((RequestResult.of(x) for x in lives), key=lambda r: (r.arrival_s, r.rid))
    )
    hist = sched.stats.itl_hist
    summary = summarize(
        list(results), sched.stats.kv_waits, (itl_quantile(hist, 0.5), itl_quantile(hist, 0.99))
    )
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
    )


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


def compare(
    control: EngineConfig,
    candidate: EngineConfig,
    workload: Workload,
    cost: CostModel | str = "glm53-flash-w4afp8-tp4-h200",
    *,
    focus: str | None = None,
) -> Comparison:
    """Run both configurations on the identical workload; ``focus`` limits the table to
    requests whose id starts with it (e.g. ``dec`` for the sequences decoding during a burst).
    """
    a = simulate(control, workload, cost)
    b = simulate(candidate, workload, cost)
    sa = a.subset(focus) if focus else a.summary
    sb = b.subset(focus) if focus else b.summary
    blind = tuple(unmodelled_differences(control, candidate))
    return Comparison(a, b, ratio_table(sa, sb), focus, blind)
