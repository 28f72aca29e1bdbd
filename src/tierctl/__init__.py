"""tierctl: one declarative spec for an LLM serving tier on docker compose.

declare -> render -> validate -> simulate -> load-test -> roll out -> read out.

The base install (spec, render, validate, catalogs, plan/rollout/runbook) is imported eagerly.
The simulator, the load generator and the readout need the ``sim``, ``bench`` and ``readout``
extras (aiohttp, numpy, scipy, tokenizers); their names below are imported on first use.
"""

import importlib as _importlib
from typing import Any as _Any

from tierctl.catalog import Catalog, build_catalog, load_catalog
from tierctl.compose import ComposeFile, Interpolation, load_compose
from tierctl.contracts import Report, Violation, validate, validate_paths
from tierctl.errors import (
    ComposeInputError,
    ContractViolation,
    GateFailed,
    InputError,
    RuntimeFailure,
    SpecError,
    SpecErrors,
    TierctlError,
)
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
from tierctl.spec import ResolvedReplica, Tier, TierSpec, load_spec, load_spec_text, resolve_tier

# name -> (module, attribute): the parts that need an extra, imported on first access.
_LAZY: dict[str, tuple[str, str]] = {
    "EngineConfig": ("tierctl.sim.config", "EngineConfig"),
    "SimResult": ("tierctl.sim.result", "SimResult"),
    "simulate": ("tierctl.sim.simulate", "simulate"),
    "bench_ab": ("tierctl.bench", "bench_ab"),
    "bench_run": ("tierctl.bench", "bench_run"),
    "load_bench_workload": ("tierctl.bench", "load_workload"),
    "PrometheusClient": ("tierctl.readout", "PrometheusClient"),
    "Readout": ("tierctl.readout", "Readout"),
    "run_readout": ("tierctl.readout", "run_readout"),
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
    "Catalog",
    "ComposeFile",
    "ComposeInputError",
    "ComposeManagerDriver",
    "ContractViolation",
    "DockerDriver",
    "EngineConfig",
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
