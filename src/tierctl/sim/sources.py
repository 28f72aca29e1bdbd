"""Where a simulation's inputs come from: an argv or a spec replica, a trace or a generator.

These are the library entry points the ``tierctl sim`` commands call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel, preset
from tierctl.sim.disagg_config import ArmConfig, DisaggTier, TransferSettings, disaggregated_tier
from tierctl.sim.result import SimResult
from tierctl.sim.simulate import Comparison, compare, simulate
from tierctl.sim.workload import Workload, generate
from tierctl.sim.workload_traces import read_workload

if TYPE_CHECKING:
    from tierctl.sim.uncertainty import FitUncertainty, WhatIf


_ROLES = ("prefill", "decode")


def _role_prefix(text: str) -> tuple[str | None, str]:
    """``prefill:NAME`` / ``decode:NAME`` -> (role, rest); anything else -> (None, text)."""
    head, sep, rest = text.partition(":")
    if sep and head in _ROLES:
        return head, rest
    return None, text


@dataclass(frozen=True)
class EngineSource:
    """An engine argv given directly, or a replica of a tier spec (its rendered argv); or
    several, the prefill and decode pools of a disaggregated arm.

    ``replica`` may list several spec replicas (``p1,p2,d1``), and ``more`` holds further
    argvs beside ``argv``; each may be prefixed ``prefill:``/``decode:`` where the flags
    leave the side open (vLLM ``kv_both``).
    """

    argv: tuple[str, ...] = ()
    spec: str | None = None
    replica: str | None = None
    engine: str | None = None  # for a bare argv; a spec names its own
    version: str | None = None  # the release pinned for a bare argv; a spec pins its own
    more: tuple[tuple[str, ...], ...] = ()
    transfer: TransferSettings | None = None

    def config(self) -> EngineConfig:
        """The engine configuration of one replica.

        Raises:
            InputError: the spec or replica cannot be read, the argv is invalid, or the
                source is a disaggregated arm (several replicas).
        """
        arm = self.arm()
        if isinstance(arm, DisaggTier):
            raise InputError(
                "a disaggregated arm (several replicas) where one replica is needed",
                rule="this command simulates one replica",
                value=", ".join(arm.names),
                fix="give one replica (sim run and sim compare take a prefill and decode pool)",
            )
        return arm

    def arm(self) -> ArmConfig:
        """One replica's configuration, or the disaggregated arm several replicas make.

        Raises:
            InputError: as :meth:`config`, and for an invalid disaggregated arm
                (:func:`~tierctl.sim.disagg_config.disaggregated_tier`).
        """
        if self.spec is None:
            argvs = [self.argv, *self.more]
            members = []
            for i, argv in enumerate(argvs):
                role, first = _role_prefix(argv[0]) if argv else (None, "")
                tokens = ([first] if first else []) + list(argv[1:]) if role else list(argv)
                where = f"argv[{i}]" if len(argvs) > 1 else "argv"
                cfg = EngineConfig.from_argv(
                    tokens, source=where, engine=self.engine, version=self.version, strict=True
                )
                members.append((where, where, cfg, role))
            return disaggregated_tier(members, self.transfer)
        from tierctl.spec import load_spec, resolve_tier

        tier = resolve_tier(load_spec(self.spec))
        members = []
        for item in (self.replica or "").split(","):
            role, name = _role_prefix(item.strip())
            if name not in tier.replicas:
                raise InputError(
                    f"no replica {name!r} in the spec",
                    rule="`replica` names one of the spec's replicas (several: comma-separated)",
                    value=name,
                    fix="use one of: " + ", ".join(tier.replicas),
                    params=("replica",),
                )
            engine = tier.spec.engine
            where = f"{self.spec}:replicas.{name}"
            cfg = EngineConfig.from_argv(
                [*tier.replicas[name].argv, *self.argv],
                source=where,
                engine=engine.kind,
                catalog=_catalog(engine.kind, engine.version),
                version=engine.version,
                strict=True,
            )
            members.append((name, where, cfg, role))
        return disaggregated_tier(members, self.transfer)


def _catalog(kind: str, version: str) -> Catalog | None:
    """The pinned release's catalog when shipped, else the simulator's default one."""
    from tierctl.catalog.store import load_catalog
    from tierctl.sim.config import default_catalog

    try:
        return load_catalog(kind, version)
    except InputError:
        return default_catalog(kind)


@dataclass(frozen=True)
class WorkloadSource:
    """A trace file, or a built-in generator with its parameters."""

    kind: str = "field"
    trace: str | None = None
    trace_format: str = "jsonl"
    seed: int = 0
    count: int = 8
    input_tokens: int = 720_000
    output_tokens: int = 256
    rate_per_s: float = 2.0
    duration_s: float = 600.0
    hours: float = 24.0

    def load(self) -> Workload:
        """Read or generate the workload."""
        if self.trace is not None:
            return read_workload(self.trace, self.trace_format)
        return generate(
            self.kind,
            self.seed,
            count=self.count,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            rate_per_s=self.rate_per_s,
            duration_s=self.duration_s,
            hours=self.hours,
        )


def run_sim(
    engine: EngineSource,
    workload: WorkloadSource,
    cost: str | CostModel,
    *,
    progress: Callable[[float, float], None] | None = None,
) -> SimResult:
    """Simulate one replica on one workload.

    ``progress(reached_s, last_arrival_s)`` is called now and then (for a progress bar). The
    workload's seed also draws the steps' jitter of a cost model that has one.
    """
    model = preset(cost) if isinstance(cost, str) else cost
    wl = workload.load()
    end = wl.requests[-1].arrival_s if wl.requests else 0.0
    tick = None if progress is None else (lambda now: progress(now, end))
    return simulate(engine.arm(), wl, model, seed=workload.seed, progress=tick)


def run_trace_streamed(
    engine: EngineSource,
    workload: WorkloadSource,
    cost: str | CostModel,
    *,
    progress: Callable[[float, float], None] | None = None,
) -> tuple[SimResult, dict[str, int], bool] | None:
    """:func:`run_sim` on a trace, streamed in bounded memory (:mod:`tierctl.sim.streaming`):
    the result without its requests, the not-completed counts, whether the percentiles are
    exact; ``None`` for a built-in workload or where streaming does not apply."""
    from tierctl.sim.streaming import simulate_trace_stream

    if workload.trace is None:
        return None
    arm = engine.arm()
    if isinstance(arm, DisaggTier):
        return None  # two pools hand requests on: the streamed path simulates one replica
    return simulate_trace_stream(
        arm, workload.trace, workload.trace_format, cost, seed=workload.seed,
        progress=progress,
    )  # fmt: skip


def compare_sims(
    control: EngineSource,
    candidate: EngineSource,
    workload: WorkloadSource,
    cost: str | CostModel,
    *,
    focus: str | None = None,
) -> Comparison:
    """Simulate two replicas on the identical workload and build the ratio table."""
    model = preset(cost) if isinstance(cost, str) else cost
    return compare(
        control.arm(), candidate.arm(), workload.load(), model, focus=focus,
        seed=workload.seed,
    )  # fmt: skip


def what_if_sims(
    control: EngineSource,
    candidate: EngineSource,
    workload: WorkloadSource,
    cost: str | CostModel,
    fit: FitUncertainty | None = None,
    *,
    focus: str | None = None,
    draws: int = 20,
    aa_floor: float | Mapping[str, float] = 0.0,
) -> WhatIf:
    """Simulate two replicas on the identical workload, with an interval on every ratio
    (:func:`tierctl.sim.uncertainty.what_if`)."""
    from tierctl.sim.uncertainty import what_if

    model = preset(cost) if isinstance(cost, str) else cost
    return what_if(
        control.arm(), candidate.arm(), workload.load(), model, fit,
        draws=draws, seed=workload.seed, aa_floor=aa_floor, focus=focus,
    )  # fmt: skip
