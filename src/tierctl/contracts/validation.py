"""Validating compose files against a tier spec: the seven contracts in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tierctl.catalog.store import load_catalog, resolve_catalog
from tierctl.compose import ComposeFile, load_compose, merge_compose
from tierctl.compose.profiles import ProfileScope
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
from tierctl.contracts.crosscheck import ComposeCheck
from tierctl.contracts.report import Report, Violation
from tierctl.engine_catalog import Catalog
from tierctl.render.compose import output_path
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.effective import engine_profile
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
    profiles: Sequence[str] | None = None,
) -> Report:
    """Check compose files (merged like compose override files) against ``spec``.

    Args:
        spec: a loaded, checked tier spec.
        compose_files: one or more files from :func:`load_compose`.
        catalog: the engine's flag catalog; default: the shipped one for the pinned release.
        spec_source: how the report names the spec.
        profiles: the active compose profiles; None: the checks that compare services look
            at the default set and each profile's set separately.

    Raises:
        InputError: no catalog for the pinned engine release (exit 2).
    """
    if catalog is None:
        catalog = load_catalog(spec.engine.kind, spec.engine.version)
    tier = resolve_tier(spec)
    merged = merge_compose(list(compose_files))
    ctx = build_context(tier, merged, catalog, profiles)
    violations: list[Violation] = []
    for check in _CHECKS:
        violations.extend(check(ctx))
    violations.extend(schema.equal_items(compose_files, violations))
    # TP x PP x DP against the GPUs each engine service is given (as without a spec). The
    # replicas' flags are already read (with the pinned catalog); only other services are
    # searched for engines.
    from tierctl.contracts.standalone import EngineService, find_engines, gpu_fit

    profile = engine_profile(spec)
    replicas = {
        v.expected.service: EngineService(
            name=v.expected.service,
            service=v.service,
            profile=profile,
            argv=v.argv,
            command_offset=0,
            flag_start=v.flag_start,
            version=spec.engine.version,
            catalog=catalog,
            uses=v.uses,
            flags=v.flags,
        )
        for v in ctx.replicas.values()
        if v.service is not None
    }
    found = {e.name: e for e in find_engines(merged, skip=frozenset(replicas))[0]}
    engines = [replicas.get(n) or found[n] for n in merged.services if n in replicas or n in found]
    warnings: list[Violation] = []
    for finding in gpu_fit(merged, engines)[0]:
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
        profiles=ctx.scope.describe(),
    )


def validate_paths(
    spec_path: str | Path,
    compose_paths: Sequence[str | Path] = (),
    *,
    catalog: str | None = None,
    profiles: Sequence[str] | None = None,
    compose_check: ComposeCheck | None = None,
) -> Report:
    """Load the spec and the compose files (default: the spec's rendered output) and validate.

    ``profiles`` as :func:`validate`; ``compose_check``: whether (and with which binary) to
    cross-check tierctl's reading with the real Compose (default: not).

    Raises:
        SpecError / SpecErrors / ComposeInputError / InputError: unusable input (exit 2).
    """
    spec = load_spec(spec_path)
    paths = list(compose_paths) or [output_path(spec, spec_path)]
    files = [load_compose(Path(p), overlay=i > 0) for i, p in enumerate(paths)]
    chosen = resolve_catalog(catalog) if catalog else None
    report = validate(spec, files, catalog=chosen, spec_source=str(spec_path), profiles=profiles)
    refusals = tuple(schema.project_refusals(paths, report.violations, profiles))
    report = replace(report, violations=report.violations + refusals)
    merged = merge_compose(files)
    checked = (compose_check or ComposeCheck(enabled=False)).run(
        merged,
        paths,
        ProfileScope.of(merged, profiles),
        refused=any(v.rule == "TC007" for v in report.violations),
    )
    report = replace(
        report, violations=report.violations + checked.violations, reader=checked.reader
    )
    from tierctl.contracts.spec_gate import in_spec

    used = chosen or load_catalog(spec.engine.kind, spec.engine.version)
    # Each violation also names the tier.yaml key to fix; one shared by every replica (a base
    # flag) is reported once.
    return replace(report, violations=tuple(in_spec(report, spec, spec_path, used)))
