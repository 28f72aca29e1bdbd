"""One set of checks: what ``validate`` would reject in a rendering, ``render`` refuses first.

:func:`check_rendering` validates the spec's own rendering with the pinned release's catalog
and turns each violation into a problem located in the *tier.yaml* (the flag's line in the
replica override, an overlay or the base args; the replica's ``gpus``; the service's compose
key), with the rule, the value and the fix. A violation every replica shares (a bad base
flag) is reported once, at the base arg, not once per replica. It also reports pairing rules
whose ``when``/``require`` name a flag the release does not have (such a rule never fires),
with a did-you-mean.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tierctl.catalog.store import load_catalog, shipped
from tierctl.compose import parse_compose
from tierctl.contracts.report import Report, Violation
from tierctl.contracts.validation import validate
from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError, Location
from tierctl.readers import LineMap, PathKey, format_path, read_text, yaml_line_map
from tierctl.spec.effective import flag_path
from tierctl.spec.tier_spec import TierSpec


@dataclass(frozen=True)
class GateResult:
    """Violations (located in the spec) and what could not be checked."""

    violations: tuple[Violation, ...]
    unchecked: tuple[str, ...]


def spec_lines(spec_path: str | Path | None) -> LineMap:
    """The line map of a spec file (empty when there is no file)."""
    if spec_path is None:
        return LineMap()
    try:
        text = read_text(spec_path, what="spec")
    except InputError:
        return LineMap()
    return yaml_line_map(text)


def check_rendering(
    spec: TierSpec,
    rendered: str,
    spec_path: str | Path | None = None,
    catalog: Catalog | None = None,
    profiles: Sequence[str] | None = None,
) -> GateResult:
    """Validate ``rendered`` (the spec's rendering) and locate each violation in the spec;
    ``profiles``: the active compose profiles (None: the checks that compare services look at
    the default set and each profile's set separately)."""
    unchecked: list[str] = []
    if catalog is None and (spec.engine.kind, spec.engine.version) in shipped():
        catalog = load_catalog(spec.engine.kind, spec.engine.version)
    if catalog is None:
        unchecked.append(
            f"engine flags: no shipped catalog for {spec.engine.kind}=={spec.engine.version}"
        )
        return GateResult((), tuple(unchecked))
    compose = parse_compose(rendered, source="(rendering)")
    report = validate(
        spec,
        [compose],
        catalog=catalog,
        spec_source=str(spec_path or "<spec>"),
        profiles=profiles,
    )
    # The rendering is not a file the user has: only the spec's place is shown.
    located = [
        replace(v, location=None) for v in in_spec(report, spec, spec_path, catalog, every=True)
    ]
    return GateResult(tuple(located), tuple(unchecked))


#: Rules whose fix is in the spec even when validating a file: a flag the release lacks or
#: misuses, a pairing rule. (Drift - TC001/TC002/TC003 - is fixed in the file.)
SPEC_FIXED = ("TC004", "TC005")


def in_spec(
    report: Report,
    spec: TierSpec,
    spec_path: str | Path | None,
    catalog: Catalog | None,
    *,
    every: bool = False,
) -> list[Violation]:
    """A report's violations with their tier.yaml places (every one for a rendering; those
    whose fix is in the spec otherwise), shared ones once, plus pairing rules that name
    unknown flags."""
    lines = spec_lines(spec_path)
    source = str(spec_path) if spec_path is not None else "<spec>"
    located = [
        locate_in_spec(v, spec, lines, source)
        if every or v.rule in SPEC_FIXED or "GPUs (TP x PP x DP" in v.message
        else v
        for v in report.violations
    ]
    if catalog is not None:
        located += rule_flags(spec, catalog, lines, source)
    return collapse(located, spec)


def locate_in_spec(v: Violation, spec: TierSpec, lines: LineMap, source: str) -> Violation:
    """Point a violation on a rendered replica at the tier.yaml key that produced it."""
    replica = _replica_of(spec, v.service)
    path: PathKey | None = None
    flag = (v.found or "").split("=", 1)[0]
    if not flag.startswith("--") and v.message.startswith("--"):
        flag = v.message.split(":", 1)[0].split()[0]
    name = flag.lstrip("-")
    if replica is not None and name:
        path = flag_path(spec, replica, name)
    if path is None and replica is not None and "GPU" in v.message:
        path = ("replicas", replica, "gpus")
    if path is None and v.service in spec.services:
        path = ("services", v.service, "compose")
    if path is None and replica is not None:
        path = ("replicas", replica)
    if path is None:
        return v
    return replace(
        v,
        spec_location=Location(file=source, line=lines.line(path), path=format_path(path)),
    )


def _replica_of(spec: TierSpec, service: str | None) -> str | None:
    for name in spec.replicas:
        if spec.engine.service.replace("{replica}", name) == service:
            return name
    return None


def collapse(violations: list[Violation], spec: TierSpec) -> list[Violation]:
    """One violation per (rule, spec place, message): a base flag wrong on every replica is
    reported once, naming the replicas."""
    out: list[Violation] = []
    index: dict[tuple[str, str | None, str], int] = {}
    services: dict[int, list[str]] = {}
    for v in violations:
        where = v.spec_location.path if v.spec_location else None
        shared = where is not None and not where.startswith("replicas.")
        message = v.message
        key = (v.rule, where, message) if shared else (v.rule, f"{where}|{v.service}", message)
        if key in index:
            names = services[index[key]]
            # A flag repeated in one replica's argv is one finding per use: name it once.
            if (v.service or "") not in names:
                names.append(v.service or "")
            continue
        index[key] = len(out)
        services[len(out)] = [v.service or ""]
        out.append(v)
    for i, names in services.items():
        if len(names) > 1:
            out[i] = replace(out[i], service=", ".join(n for n in names if n))
    return out


def rule_flags(spec: TierSpec, catalog: Catalog, lines: LineMap, source: str) -> list[Violation]:
    """Pairing rules naming a flag the pinned release does not have: they never fire."""
    out: list[Violation] = []
    spellings = sorted({s[2:] for f in catalog.flags.values() for s in f.spellings()})
    for i, rule in enumerate(spec.rules):
        for part in ("when", "require"):
            for name in getattr(rule, part).args:
                # Exact spellings only: a rule compares the spec's flag names as written, so
                # an abbreviation the engine would accept still never matches a replica.
                flag, how = catalog.resolve(f"--{name}")
                if how == "spelling":
                    continue
                close = (
                    [flag.name[2:]]
                    if flag is not None
                    else difflib.get_close_matches(name, spellings, n=1, cutoff=0.75)
                )
                path: PathKey = ("rules", i, part, "args", name)
                out.append(
                    Violation(
                        rule="TC005",
                        service=None,
                        message=f"rule {rule.id or i}: {part} names --{name}, which "
                        f"{catalog.ref} does not have, so the rule "
                        + ("never fires" if part == "when" else "can never hold"),
                        spec_location=Location(
                            file=source, line=lines.line(path), path=format_path(path)
                        ),
                        found=name,
                        fix=f"did you mean {close[0]}?" if close else "fix the flag name",
                    )
                )
    return out
