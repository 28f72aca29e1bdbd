"""Validating compose files against a tier spec: the seven contracts in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tierctl.catalog.store import load_catalog, resolve_catalog
from tierctl.compose import ComposeFile, load_compose, merge_compose
from tierctl.contracts import (
    argv_pinning,
    flag_catalog,
    hygiene,
    pairing,
    schema,
    shared_runtime,
    variant,
)
from tierctl.contracts.context import build_context
from tierctl.contracts.report import Report, Violation
from tierctl.engine_catalog import Catalog
from tierctl.render.compose import output_path
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.tier_spec import TierSpec

_CHECKS = (
    argv_pinning.check,
    variant.check,
    shared_runtime.check,
    flag_catalog.check,
    pairing.check,
    hygiene.check,
    schema.check,
)


def validate(
    spec: TierSpec,
    compose_files: Sequence[ComposeFile],
    *,
    catalog: Catalog | None = None,
    spec_source: str = "<spec>",
) -> Report:
    """Check compose files (merged like compose override files) against ``spec``.

    Args:
        spec: a loaded, checked tier spec.
        compose_files: one or more files from :func:`load_compose`.
        catalog: the engine's flag catalog; default: the shipped one for the pinned release.
        spec_source: how the report names the spec.

    Raises:
        InputError: no catalog for the pinned engine release (exit 2).
    """
    if catalog is None:
        catalog = load_catalog(spec.engine.kind, spec.engine.version)
    tier = resolve_tier(spec)
    merged = merge_compose(list(compose_files))
    ctx = build_context(tier, merged, catalog)
    violations: list[Violation] = []
    for check in _CHECKS:
        violations.extend(check(ctx))
    # TP x PP x DP against the GPUs each engine service is given (as without a spec).
    from tierctl.contracts.standalone import find_engines, gpu_fit

    warnings: list[Violation] = []
    for finding in gpu_fit(merged, find_engines(merged)[0])[0]:
        # Fewer GPUs than TP x PP x DP cannot start; more is waste, worth a warning.
        short = int(finding.expected or 0) > int(finding.found or 0)
        (violations if short else warnings).append(finding)
    return Report(
        spec=spec_source,
        files=tuple(f.source for f in compose_files),
        catalog=catalog.ref,
        services_checked=len(merged.services),
        replicas_checked=len(tier.replicas),
        violations=tuple(violations),
        warnings=tuple(warnings),
    )


def validate_paths(
    spec_path: str | Path,
    compose_paths: Sequence[str | Path] = (),
    *,
    catalog: str | None = None,
) -> Report:
    """Load the spec and the compose files (default: the spec's rendered output) and validate.

    Raises:
        SpecError / SpecErrors / ComposeInputError / InputError: unusable input (exit 2).
    """
    spec = load_spec(spec_path)
    paths = list(compose_paths) or [output_path(spec, spec_path)]
    files = [load_compose(Path(p)) for p in paths]
    chosen = resolve_catalog(catalog) if catalog else None
    report = validate(spec, files, catalog=chosen, spec_source=str(spec_path))
    from tierctl.contracts.spec_gate import in_spec

    used = chosen or load_catalog(spec.engine.kind, spec.engine.version)
    # Each violation also names the tier.yaml key to fix; one shared by every replica (a base
    # flag) is reported once.
    return replace(report, violations=tuple(in_spec(report, spec, spec_path, used)))
