"""tierctl: one declarative spec for an LLM serving tier on docker compose.

declare -> render -> validate -> simulate -> load-test -> roll out -> read out.

Only the error hierarchy is imported eagerly: every other public name is imported on first
access (PEP 562), so ``import tierctl`` -- and with it ``tierctl --version`` and ``--help`` --
costs milliseconds, not the second it takes to import pydantic, jsonschema, httpx and the
catalogs. The simulator, the load generator and the readout need the ``sim``, ``bench`` and
``readout`` extras (aiohttp, numpy, scipy, tokenizers).
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from tierctl.errors import (
    CannotJudge,
    ComposeInputError,
    ContractViolation,
    ExitCode,
    GateFailed,
    InputError,
    RuntimeFailure,
    SpecError,
    SpecErrors,
    TierctlError,
)

if _TYPE_CHECKING:  # the lazy names, for type checkers and IDEs
    from tierctl.bench import bench_ab, bench_run
    from tierctl.bench import load_workload as load_bench_workload
    from tierctl.catalog import Catalog, build_catalog, load_catalog
    from tierctl.compose import ComposeFile, Interpolation, load_compose
    from tierctl.contracts import Report, Violation, validate, validate_paths
    from tierctl.readout import PrometheusClient, Readout, run_readout
    from tierctl.render import render_compose
    from tierctl.rollout import (
        ComposeManagerDriver,
        DockerDriver,
        GateSettings,
        LocalDriver,
        PlanOptions,
        RolloutOptions,
        RolloutResult,
        plan_files,
        render_runbook,
        run_rollout,
    )
    from tierctl.rollout import Plan as RolloutPlan
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.result import SimResult
    from tierctl.sim.simulate import simulate
    from tierctl.spec import (
        ResolvedReplica,
        Tier,
        TierSpec,
        load_spec,
        load_spec_text,
        resolve_tier,
    )

# name -> (module, attribute), imported on first access.
_LAZY: dict[str, tuple[str, str]] = {
    "Catalog": ("tierctl.catalog", "Catalog"),
    "ComposeFile": ("tierctl.compose", "ComposeFile"),
    "ComposeManagerDriver": ("tierctl.rollout", "ComposeManagerDriver"),
    "DockerDriver": ("tierctl.rollout", "DockerDriver"),
    "EngineConfig": ("tierctl.sim.config", "EngineConfig"),
    "GateSettings": ("tierctl.rollout", "GateSettings"),
    "Interpolation": ("tierctl.compose", "Interpolation"),
    "LocalDriver": ("tierctl.rollout", "LocalDriver"),
    "PlanOptions": ("tierctl.rollout", "PlanOptions"),
    "PrometheusClient": ("tierctl.readout", "PrometheusClient"),
    "Readout": ("tierctl.readout", "Readout"),
    "Report": ("tierctl.contracts", "Report"),
    "ResolvedReplica": ("tierctl.spec", "ResolvedReplica"),
    "RolloutOptions": ("tierctl.rollout", "RolloutOptions"),
    "RolloutPlan": ("tierctl.rollout", "Plan"),
    "RolloutResult": ("tierctl.rollout", "RolloutResult"),
    "SimResult": ("tierctl.sim.result", "SimResult"),
    "Tier": ("tierctl.spec", "Tier"),
    "TierSpec": ("tierctl.spec", "TierSpec"),
    "Violation": ("tierctl.contracts", "Violation"),
    "bench_ab": ("tierctl.bench", "bench_ab"),
    "bench_run": ("tierctl.bench", "bench_run"),
    "build_catalog": ("tierctl.catalog", "build_catalog"),
    "load_bench_workload": ("tierctl.bench", "load_workload"),
    "load_catalog": ("tierctl.catalog", "load_catalog"),
    "load_compose": ("tierctl.compose", "load_compose"),
    "load_spec": ("tierctl.spec", "load_spec"),
    "load_spec_text": ("tierctl.spec", "load_spec_text"),
    "plan_files": ("tierctl.rollout", "plan_files"),
    "render_compose": ("tierctl.render", "render_compose"),
    "render_runbook": ("tierctl.rollout", "render_runbook"),
    "resolve_tier": ("tierctl.spec", "resolve_tier"),
    "run_readout": ("tierctl.readout", "run_readout"),
    "run_rollout": ("tierctl.rollout", "run_rollout"),
    "simulate": ("tierctl.sim.simulate", "simulate"),
    "validate": ("tierctl.contracts", "validate"),
    "validate_paths": ("tierctl.contracts", "validate_paths"),
}


def __getattr__(name: str) -> _Any:
    """Import the extras' names on first use (PEP 562)."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tierctl' has no attribute {name!r}")
    value = getattr(_importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Module attributes, including the lazily imported names."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CannotJudge",
    "Catalog",
    "ComposeFile",
    "ComposeInputError",
    "ComposeManagerDriver",
    "ContractViolation",
    "DockerDriver",
    "EngineConfig",
    "ExitCode",
    "GateFailed",
    "GateSettings",
    "InputError",
    "Interpolation",
    "LocalDriver",
    "PlanOptions",
    "PrometheusClient",
    "Readout",
    "Report",
    "ResolvedReplica",
    "RolloutOptions",
    "RolloutPlan",
    "RolloutResult",
    "RuntimeFailure",
    "SimResult",
    "SpecError",
    "SpecErrors",
    "Tier",
    "TierSpec",
    "TierctlError",
    "Violation",
    "bench_ab",
    "bench_run",
    "build_catalog",
    "load_bench_workload",
    "load_catalog",
    "load_compose",
    "load_spec",
    "load_spec_text",
    "plan_files",
    "render_compose",
    "render_runbook",
    "resolve_tier",
    "run_readout",
    "run_rollout",
    "simulate",
    "validate",
    "validate_paths",
]
