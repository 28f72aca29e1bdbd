"""``validate``'s cross-check: tierctl's reading of the project against the real Compose's.

When a Compose v2 binary is found (:func:`tierctl.compose.binary.find_compose_binary`), each
project checked (the active profiles', or the default set and each profile's set) is read
twice, with the same environment (this process's, ``COMPOSE_*`` removed, and the project's
``.env`` as Compose reads it): by ``docker compose config --format json`` and by tierctl's own
normalised reading in the same shape (:func:`tierctl.compose.project.project_config`, what
``tierctl compose config`` prints). Every difference is a TC007 violation naming the key and
both values: which services run, and every key of every service and of the top-level
resources. A project only one of them refuses is one too; both refusing is agreement.

Where Compose cannot interpolate (a required ``${VAR:?}`` unset, as where ``validate`` runs
without the secrets) the values are compared as written instead: ``config --no-interpolate``
against the reading ``validate`` checks (every ``${...}`` kept), value by value for what the
contracts rely on: image, ``command``/``entrypoint`` as argv, environment, labels, ports (host
IP, published, target, protocol), mounts (type, target, read-only, a named volume's name),
GPU ids and ``profiles``. A value that looks like a credential is shown as its length.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierctl.compose import ComposeFile, ComposeService
from tierctl.compose.forms import (
    FormError,
    normalise_environment,
    normalise_labels,
    scalar_text,
    split_command,
)
from tierctl.compose.long_forms import parse_port
from tierctl.compose.profiles import ProfileScope, enabled
from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.contracts.credentials import looks_secret_name, looks_secret_value
from tierctl.contracts.report import Violation
from tierctl.contracts.schema import refuse_invalid, unset_required
from tierctl.errors import ComposeInputError, InputError, RuntimeFailure

if TYPE_CHECKING:  # the binary's module (subprocess, shutil) loads when a binary is used
    from tierctl.compose.binary import ComposeBinary

#: What the report says when no binary ran.
OWN_READER_ONLY = "compose: no compose binary found: tierctl's own reader only"
NOT_ASKED = "compose: tierctl's own reader only (the cross-check with a compose binary is off)"

_SHOWN = 240  # characters of a value a message shows
#: The top-level keys compared besides the services (``x-*`` extensions mean nothing to
#: compose, and nothing to validate).
_RESOURCES = ("networks", "volumes", "secrets", "configs")
_REFUSED_TOO = "refused"  # _as_written's note: compose refused, nothing was compared


@dataclass(frozen=True)
class CrossCheck:
    """The differences found, and the report's line saying which reader was used."""

    violations: tuple[Violation, ...]
    reader: str


@dataclass(frozen=True)
class ComposeCheck:
    """Whether and how ``validate`` cross-checks with the real Compose.

    Attributes:
        enabled: False: no cross-check (the report says so).
        binary: a Compose v2 program to use; default: the first found.
        environ: the environment both readers interpolate with (default: this process's).
    """

    enabled: bool = True
    binary: str | Path | None = None
    environ: Mapping[str, str] | None = None

    def run(
        self,
        merged: ComposeFile,
        paths: Sequence[str | Path],
        scope: ProfileScope,
        *,
        refused: bool = False,
    ) -> CrossCheck:
        """Compare tierctl's reading of ``paths`` (``merged``: as ``validate`` read them)
        with Compose's, under ``scope``'s profiles; ``refused``: tierctl's own checks already
        reject the file as compose would (TC007), so compose refusing it too is agreement.

        Raises:
            InputError: ``binary`` does not run as Compose v2.
        """
        if not self.enabled:
            return CrossCheck((), NOT_ASKED)
        try:
            from tierctl.compose.binary import find_compose_binary

            found = find_compose_binary(self.binary)
        except RuntimeFailure as exc:  # a path the operator gave: bad input, exit 2
            raise InputError(
                exc.message, rule=exc.rule, value=exc.value, fix=exc.fix, params=exc.params
            ) from None
        if found is None:
            return CrossCheck((), OWN_READER_ONLY)
        environ = dict(os.environ if self.environ is None else self.environ)
        return cross_check(merged, paths, scope, found, environ, refused=refused)


def title(binary: ComposeBinary) -> str:
    """``docker compose v2.40.3`` (the plugin) or ``docker-compose v2.40.3``."""
    name = "docker compose" if len(binary.argv) > 1 else "docker-compose"
    return f"{name} v{binary.version}"


def cross_check(
    merged: ComposeFile,
    paths: Sequence[str | Path],
    scope: ProfileScope,
    found: ComposeBinary,
    environ: Mapping[str, str],
    *,
    refused: bool = False,
) -> CrossCheck:
    """Compare tierctl's reading of ``paths`` with ``found``'s, project by project of
    ``scope`` (``merged``: the files as ``validate`` read them; ``refused`` as
    :meth:`ComposeCheck.run`)."""
    # COMPOSE_FILE, COMPOSE_PROFILES, COMPOSE_PROJECT_NAME would change what compose reads
    # behind the files and profiles passed; both readers get the same environment.
    env = {k: v for k, v in environ.items() if not k.startswith("COMPOSE_")}
    name = title(found)
    violations: list[Violation] = []
    compared: set[str] = set()
    as_written: list[str] = []
    projects = [(s.label, s.profiles) for s in scope.sets()] if scope.named else [("", ())]
    if scope.active is not None:
        projects = [(scope.sets()[0].label, scope.active)]
    for label, active in projects:
        where = f" ({label})" if label and scope.named else ""
        theirs, their_error = _compose(paths, found, active, env)
        ours, our_error = _ours(paths, active, env)
        if theirs is not None and ours is not None:
            violations.extend(compare_documents(merged, name, ours, theirs, where, compared))
        elif their_error is not None and our_error is not None:
            if unset_required(their_error):
                as_written.append(label or "the project")
        elif their_error is not None and not refused:
            violations.append(
                _violation(
                    merged,
                    None,
                    (),
                    f"{name} refuses the project{where}, which tierctl reads: {their_error}",
                    "tierctl reads it",
                    f"{name}: {their_error}",
                    "fix what compose names (tierctl should refuse it too: report it)",
                )
            )
        elif our_error is not None:
            violations.append(
                _violation(
                    merged,
                    None,
                    (),
                    f"tierctl's reading refuses the project{where}, which {name} reads: "
                    f"{our_error}",
                    f"tierctl: {our_error}",
                    f"{name} reads it",
                    "report tierctl's refusal as a bug (compose is the judge)",
                )
            )
    if as_written:
        kept = _as_written(merged, paths, scope, found, refused=refused)
        violations.extend(kept.violations)
        if kept.reader != _REFUSED_TOO:
            compared |= set(merged.services)
    reader = (
        f"compose: tierctl's reader; cross-checked with {name} at {found.argv[0]}"
        f" ({len(compared)} service{'s' if len(compared) != 1 else ''} compared"
        + (", values as written: a required variable is unset" if as_written else "")
        + (f", {len(violations)} difference(s))" if violations else ", no difference)")
    )
    if not compared and not violations:
        reader = f"compose: tierctl's reader; {name} at {found.argv[0]} refuses the project too"
    return CrossCheck(tuple(violations), reader)


def _compose(
    paths: Sequence[str | Path],
    binary: ComposeBinary,
    active: Sequence[str],
    env: Mapping[str, str],
) -> tuple[dict[str, Any] | None, str | None]:
    try:
        from tierctl.compose.binary import compose_config

        return compose_config(paths, binary=binary, profiles=active, env=env), None
    except ComposeInputError as exc:
        return None, exc.message
    except RuntimeFailure as exc:
        return None, exc.message


def _ours(
    paths: Sequence[str | Path], active: Sequence[str], env: Mapping[str, str]
) -> tuple[dict[str, Any] | None, str | None]:
    try:
        # The schema as Compose applies it first, as `tierctl compose config` reads: the
        # normalising reader relies on the shapes it guarantees.
        options = ProjectOptions(profiles=tuple(active), environ=env)
        # in the shape the binary's JSON has (what it is compared with)
        return json_form(project_config(paths, options, check=refuse_invalid)), None
    except ComposeInputError as exc:
        return None, exc.message


def compare_documents(
    merged: ComposeFile,
    name: str,
    ours: dict[str, Any],
    theirs: dict[str, Any],
    where: str,
    compared: set[str],
) -> list[Violation]:
    """Both normalised documents (``ours`` from :func:`project_config`, ``theirs`` from the
    binary ``name``), key by key: services (which run, then each key; ``compared`` collects
    the services done), then the top-level resources; ``where`` names the project."""
    out: list[Violation] = []
    our_services = ours.get("services") or {}
    their_services = theirs.get("services") or {}
    out.extend(_service_sets(merged, name, list(our_services), list(their_services), where))
    for svc in our_services:
        if svc not in their_services or svc in compared:
            continue
        compared.add(svc)
        a, b = our_services[svc], their_services[svc]
        for key in sorted(k for k in set(a) | set(b) if not str(k).startswith("x-")):
            if a.get(key) != b.get(key) and not _omitted_clearing(key, a.get(key), b.get(key)):
                out.append(
                    _difference(merged, name, svc, ("services", svc, key), a.get(key), b.get(key))
                )
    for key in _RESOURCES:
        if ours.get(key) != theirs.get(key):
            out.append(_difference(merged, name, None, (key,), ours.get(key), theirs.get(key)))
    return out


def _difference(
    merged: ComposeFile,
    name: str,
    service: str | None,
    path: tuple[str, ...],
    mine: Any,
    compose: Any,
) -> Violation:
    shown_mine, shown_theirs = _shown(path[-1], mine), _shown(path[-1], compose)
    return _violation(
        merged,
        service,
        path,
        f"tierctl and {name} read {'.'.join(path)} differently: tierctl reads {shown_mine}, "
        f"{name} reads {shown_theirs}",
        f"tierctl: {shown_mine}",
        f"{name}: {shown_theirs}",
        "compose runs what it reads: write the value so both agree, and report tierctl's "
        "reading as a bug",
    )


def _violation(
    merged: ComposeFile,
    service: str | None,
    path: tuple[str, ...],
    message: str,
    found: str,
    expected: str,
    fix: str,
) -> Violation:
    return Violation(
        rule="TC007",
        service=service,
        message=message,
        location=merged.location(*path),
        found=found,
        expected=expected,
        fix=fix,
    )


def _redacted(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redacted(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(key, v) for v in value]
    if isinstance(value, str) and (
        looks_secret_value(value) or (looks_secret_name(key) and value and "${" not in value)
    ):
        return f"<{len(value)} chars>"
    return value


def _shown(key: str, value: Any) -> str:
    if value is None:
        return "nothing"
    text = repr(_redacted(key, value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _as_written(
    merged: ComposeFile,
    paths: Sequence[str | Path],
    scope: ProfileScope,
    found: ComposeBinary,
    *,
    refused: bool = False,
) -> CrossCheck:
    """The values as written (``config --no-interpolate``) against ``merged``: without
    interpolation compose applies no profile and prints every service with its ``profiles``,
    so each project's services follow from them."""
    name = title(found)
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    try:
        from tierctl.compose.binary import compose_config

        data = compose_config(paths, binary=found, env=env, interpolate=False)
    except RuntimeFailure as exc:
        return CrossCheck((), f"compose: tierctl's reader; {name} failed: {exc.message}")
    except ComposeInputError as exc:
        if refused:
            return CrossCheck((), _REFUSED_TOO)
        refusal = _violation(
            merged,
            None,
            (),
            f"{name} refuses the project, which tierctl reads: {exc.message}",
            "tierctl reads it",
            f"{name}: {exc.message}",
            "fix what compose names (tierctl should refuse it too: report it)",
        )
        return CrossCheck((refusal,), _REFUSED_TOO)
    raw = data.get("services") if isinstance(data, dict) else None
    theirs = (
        {str(k): v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}
    )
    violations: list[Violation] = []
    their_profiles = {n: tuple(str(p) for p in v.get("profiles") or ()) for n, v in theirs.items()}
    projects = [(s.label, s.profiles) for s in scope.sets()]
    if scope.active is None:  # a profile only compose sees is a project of its own
        for p in dict.fromkeys(p for ps in their_profiles.values() for p in ps):
            if p not in scope.named:
                projects.append((f"profile {p}", (p,)))
    for label, active in projects:
        where = f" ({label})" if scope.named or len(projects) > 1 else ""
        ours = [n for n, ps in scope.profiles.items() if enabled(ps, active)]
        compose_runs = [n for n, ps in their_profiles.items() if enabled(ps, active)]
        violations.extend(_service_sets(merged, name, ours, compose_runs, where))
    for svc in merged.services:
        if svc in theirs:
            violations.extend(compare_service(merged, name, svc, theirs[svc]))
    return CrossCheck(tuple(violations), "")


def _service_sets(
    merged: ComposeFile, name: str, ours: list[str], theirs: list[str], label: str
) -> list[Violation]:
    out = []
    for svc, who in [(n, "tierctl") for n in ours if n not in theirs] + [
        (n, name) for n in theirs if n not in ours
    ]:
        other = name if who == "tierctl" else "tierctl"
        out.append(
            Violation(
                rule="TC007",
                service=svc,
                message=f"{who} runs service {svc}{label} and {other} does not",
                location=merged.location("services", svc),
                expected=f"{name}: {'runs it' if svc in theirs else 'does not run it'}",
                found=f"tierctl: {'runs it' if svc in ours else 'does not run it'}",
                fix="check the service's profiles: (tierctl should read them as compose does)",
            )
        )
    return out


def compare_service(
    merged: ComposeFile, name: str, svc: str, theirs: dict[str, Any]
) -> list[Violation]:
    """Every compared value of one service as written: tierctl's reading (``merged``)
    against Compose's ``--no-interpolate`` JSON (``name``: the binary's title)."""
    ours = merged.services[svc]
    out: list[Violation] = []
    for key, read in _READERS:
        mine, compose = read(ours.data, ours), read(theirs, None)
        if mine == compose or _omitted_clearing(key, mine, compose):
            continue
        shown_mine, shown_theirs = _show(key, mine), _show(key, compose)
        out.append(
            Violation(
                rule="TC007",
                service=svc,
                message=f"tierctl and {name} read services.{svc}.{key} differently: "
                f"tierctl reads {shown_mine}, {name} reads {shown_theirs}",
                location=merged.location("services", svc, key),
                expected=f"{name}: {shown_theirs}",
                found=f"tierctl: {shown_mine}",
                fix="compose runs what it reads: write the value so both agree, and report "
                "tierctl's reading as a bug",
            )
        )
    return out


def _omitted_clearing(key: str, mine: Any, compose: Any) -> bool:
    """An empty ``entrypoint``/``command`` (``[]``: the image's own is cleared) that
    ``docker compose config`` leaves out of its output although ``up`` honours it (the
    known omission of docker/compose#8517 and #9634): the same reading, not a difference."""
    return key in ("entrypoint", "command") and compose in (None, ()) and mine in ((), [])


# --- one reader per compared value: (service data, tierctl's service or None) -> value ----


def _image(data: dict[str, Any], svc: ComposeService | None) -> Any:
    return svc.image if svc is not None else data.get("image")


def _argv(key: str) -> Callable[[dict[str, Any], ComposeService | None], Any]:
    def read(data: dict[str, Any], svc: ComposeService | None) -> Any:
        if svc is not None:
            return svc.command if key == "command" else svc.entrypoint
        try:
            return split_command(data.get(key))
        except FormError:
            return data.get(key)

    return read


def _environment(data: dict[str, Any], svc: ComposeService | None) -> Any:
    if svc is not None:
        return dict(sorted(svc.environment.items()))
    # Without interpolation compose leaves a list holding a reference in its list form.
    try:
        env = normalise_environment(data.get("environment"))
    except FormError:
        return data.get("environment")
    return dict(sorted(env.items()))


def _labels(data: dict[str, Any], svc: ComposeService | None) -> Any:
    if svc is not None:
        return dict(sorted(svc.labels.items()))
    try:
        return dict(sorted(normalise_labels(data.get("labels")).items()))
    except FormError:
        return data.get("labels")


def _ports(data: dict[str, Any], svc: ComposeService | None) -> Any:
    entries = data.get("ports")
    out: list[tuple[str, str, str, str]] = []
    for entry in entries if isinstance(entries, list) else []:
        out.extend(_port(entry))
    return sorted(out)


def _port(entry: Any) -> list[tuple[str, str, str, str]]:
    """(host IP, published, target, protocol) of one port entry in Compose's long form (a
    range gives one per port); a reference kept as written is compared as written."""
    if isinstance(entry, str) and "$" in entry:
        return [("", "", entry, "")]
    try:
        longs = parse_port(entry)
    except FormError:
        return [("", "", scalar_text(entry), "?")]
    return [
        (
            str(p.get("host_ip") or ""),
            scalar_text(p.get("published")),
            scalar_text(p.get("target")),
            str(p.get("protocol") or "tcp"),
        )
        for p in longs
    ]


def _volumes(data: dict[str, Any], svc: ComposeService | None) -> Any:
    entries = data.get("volumes")
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            kind = str(entry.get("type") or "volume")
            source = entry.get("source")
            target = str(entry.get("target") or "")
            read_only = bool(entry.get("read_only"))
        else:
            parts = _colon_parts(scalar_text(entry))
            source = parts[0] if len(parts) > 1 else None
            target = parts[1] if len(parts) > 1 else parts[0]
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
            bind = source is not None and source[:1] in ("/", ".", "~")
            kind = "bind" if bind else "volume"
        # Bind sources are rewritten to absolute paths by compose (a deliberate difference):
        # only a named volume's name is compared.
        named = str(source) if kind == "volume" and source else ""
        out.append((kind, target, read_only, named))
    return sorted(out)


def _colon_parts(text: str) -> list[str]:
    """``text`` split at each ``:`` outside a ``${...}`` reference (whose message or default
    may hold colons)."""
    parts, depth, current = [], 0, []
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("${", i):
            depth += 1
            current.append("${")
            i += 2
            continue
        if c == "}" and depth:
            depth -= 1
        if c == ":" and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return parts


def _gpus(data: dict[str, Any], svc: ComposeService | None) -> Any:
    if svc is not None:
        return svc.gpu_ids
    return ComposeService(name="", data=data, command=None, environment={}, labels={}).gpu_ids


def _profiles(data: dict[str, Any], svc: ComposeService | None) -> Any:
    if svc is not None:
        return svc.profiles
    value = data.get("profiles")
    return tuple(str(p) for p in value) if isinstance(value, list) else ()


_READERS: tuple[tuple[str, Callable[[dict[str, Any], ComposeService | None], Any]], ...] = (
    ("image", _image),
    ("command", _argv("command")),
    ("entrypoint", _argv("entrypoint")),
    ("environment", _environment),
    ("labels", _labels),
    ("ports", _ports),
    ("volumes", _volumes),
    ("deploy", _gpus),
    ("profiles", _profiles),
)


def _show(key: str, value: Any) -> str:
    if key == "environment" and isinstance(value, dict):
        value = {
            k: (f"<{len(v)} chars>" if v and looks_secret_name(k) and "${" not in v else v)
            for k, v in value.items()
        }
    if key == "deploy":
        return "GPU ids " + (",".join(value) if value else "none")
    if value is None:
        return "nothing"
    return repr(value)
