"""TC004 engine-flag-catalog: every flag exists in the pinned release and its value fits.

The catalog is the engine's own argument definitions (see :mod:`tierctl.catalog`). A flag the
pinned release lacks is checked against the other shipped releases, so the message can say
"added in 0.5.23" (pin a newer engine) or "last in 0.5.16" (the flag was removed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tierctl.catalog.store import did_you_mean, unknown_flag
from tierctl.compose import ComposeFile
from tierctl.compose.argv import FlagUse
from tierctl.contracts.context import Context
from tierctl.contracts.credentials import is_secret_flag
from tierctl.contracts.report import Violation
from tierctl.credentials import carries_credential, shown_value
from tierctl.engine_catalog import Catalog, Flag, FlagType

_HUMAN_INT = re.compile(r"^-?\d+(\.\d+)?[kKmMgGtT]?$")


def check(ctx: Context) -> Iterator[Violation]:
    """Unknown flags, wrong value types, values outside the choices, missing values."""
    catalog = ctx.catalog
    if catalog is None:
        return
    # The replicas' argvs mostly repeat each other's flags; one memo for this check's one
    # catalog (a finding reads only the catalog, the token and its values: see flag_findings).
    memo: _Memo = {}
    for view in ctx.replicas.values():
        if view.service is None:
            continue
        yield from check_uses(
            catalog, ctx.compose, view.expected.service, view.uses, view.command_offset, memo=memo
        )


def check_uses(
    catalog: Catalog,
    compose: ComposeFile,
    svc: str,
    uses: Iterable[FlagUse],
    offset: int = 0,
    *,
    at: int | None = None,
    memo: _Memo | None = None,
) -> Iterator[Violation]:
    """TC004 on one service's parsed flags (with or without a spec); ``offset``: how many argv
    tokens come before ``command[0]`` (an image's entrypoint); ``at``: the command token every
    flag sits in (a shell script), instead; ``memo``: as :func:`flag_findings`."""
    for finding in flag_findings(catalog, uses, memo):
        use = finding.use
        index = at if at is not None else use.index - offset
        # Located only when reported: the line map costs a second YAML pass over the file.
        yield Violation(
            rule="TC004",
            service=svc,
            location=compose.location("services", svc, "command", index),
            message=finding.message,
            found=finding.found,
            fix=finding.fix,
        )


@dataclass(frozen=True)
class FlagFinding:
    """One flag the catalog refuses: the use, what is wrong, the token found, the fix."""

    use: FlagUse
    message: str
    found: str | None
    fix: str | None


#: (token, values) -> what :func:`_use_finding` said of a flag use, for one catalog.
_Memo = dict[tuple[str, tuple[str, ...]], "tuple[str, str | None, str | None] | None"]


def flag_findings(
    catalog: Catalog, uses: Iterable[FlagUse], memo: _Memo | None = None
) -> Iterator[FlagFinding]:
    """TC004's findings on parsed flags, wherever they were read from (a compose command, a
    Kubernetes container's args, an env string of extra flags): stray values, unknown flags
    (with the nearest known ones), values of the wrong type or outside the choices.

    ``memo``: findings already made with this same ``catalog`` (unchanged in between), keyed
    by the use's token and values, the only parts of a use a finding reads; a caller passes
    one dict for several argvs checked against one catalog, never across catalogs. Without
    one, a memo for this call: an argv may repeat one flag 200,000 times, and each finding on
    an unknown flag costs a did-you-mean scan of the catalog (sweep seed 4411931, input 6830).
    """
    if memo is None:
        memo = {}
    for use in uses:
        key = (use.token, use.values)
        if key in memo:
            found = memo[key]
        else:
            found = _use_finding(catalog, use)
            memo[key] = found
        if found is not None:
            yield FlagFinding(use, *found)


def _use_finding(catalog: Catalog, use: FlagUse) -> tuple[str, str | None, str | None] | None:
    """(message, found, fix) of one flag use the catalog refuses, or None."""
    if not use.token:
        return (
            f"stray value {shown_value(use.values[0])} before any flag",
            None,
            "put the value after its flag, or drop it",
        )
    flag = catalog.lookup(use.token)
    if flag is None:
        return (
            unknown_flag(catalog.engine, catalog.version, use.token)
            + _ambiguity(catalog, use.token),
            use.token,
            did_you_mean(catalog, use.token),
        )
    if "." in use.token and catalog.resolve(use.token)[1] == "json key":
        return None  # one key of a JSON flag (vLLM): any text, the engine types it
    problem = value_problem(flag, use)
    if problem and (is_secret_flag(flag.name) or any(map(carries_credential, use.values))):
        problem = "value rejected (a credential: not shown)"
    if problem:
        return f"{use.token}: {problem} ({catalog.ref})", None, _value_fix(flag)
    return None


def _ambiguity(catalog: Catalog, token: str) -> str:
    how = catalog.resolve(token)[1]
    return (
        f" ({how.replace('ambiguous: ', 'an ambiguous abbreviation of ')})"
        if how.startswith("ambiguous")
        else ""
    )


def _value_fix(flag: Flag) -> str:
    if flag.choices is not None:
        return "use one of: " + ", ".join(str(c) for c in flag.choices if c is not None)[:200]
    if not flag.takes_value() and flag.nargs != "?":
        return "give the flag alone (it takes no value)"
    return f"give one {flag.type} value" if flag.type != "list" else "give the values after it"


def value_problem(flag: Flag, use: FlagUse) -> str | None:
    """Why the values given to ``flag`` are not acceptable, or None."""
    values = use.values
    if any("${" in v for v in values):
        return None  # filled in by compose at deploy time
    if not flag.takes_value() and flag.nargs != "?":
        if values:
            return f"takes no value, found {' '.join(values)!r}"
        return None
    if not values:
        return None if flag.nargs in ("?", "*") else f"expects a {flag.type} value, found none"
    if flag.type != "list" and len(values) > 1:
        return f"takes one value, found {len(values)}: {' '.join(values)!r}"
    element: FlagType = flag.element_type or "str" if flag.type == "list" else flag.type
    for value in values:
        bad = _type_problem(element, value, flag.parser)
        if bad:
            return bad
        if flag.choices is not None:
            allowed = [str(c) for c in flag.choices if c is not None]
            if value not in allowed:
                shown = ", ".join(allowed[:12]) + (", ..." if len(allowed) > 12 else "")
                return f"{value!r} is not one of the allowed choices ({shown})"
    return None


def _type_problem(kind: FlagType, value: str, parser: str | None) -> str | None:
    if kind == "int":
        pattern_ok = _HUMAN_INT.match(value) if parser == "human_readable_int" else None
        try:
            int(value)
        except ValueError:
            if not pattern_ok:
                return f"expects an integer, found {value!r}"
    elif kind == "float":
        try:
            float(value)
        except ValueError:
            return f"expects a number, found {value!r}"
    elif kind == "json":
        try:
            loaded = json.loads(value)
        except ValueError:
            return f"expects JSON, found {value!r}"
        if parser == "parse_dataclass" and not isinstance(loaded, dict):
            # vLLM validates a config flag's JSON as its dataclass: only an object is one
            # (vLLM 0.32.0 refuses `--compilation-config 3`, an old release's level).
            return f"expects a JSON object ({{...}}), found {value!r}"
    return None
