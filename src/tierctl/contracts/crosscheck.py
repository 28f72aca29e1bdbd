"""``validate``'s cross-check: tierctl's reading of the project against the real Compose's.

When a Compose v2 binary is found (:mod:`tierctl.contracts.compose_binary`), the same files
are read by ``docker compose config --no-interpolate --format json`` (references kept as
written, as ``validate`` reads them; in that mode compose prints every service with its
``profiles``), and every value the contracts rely on is compared: which services run in each
project checked (the active profiles', or the default set and each profile's), image,
``command``/``entrypoint`` as argv, environment, labels, ports (host IP, published, target,
protocol), mounts (type, target, read-only, a named volume's name), the GPU ids reserved and
``profiles``.
A difference is a TC007 violation naming both values (an environment value whose key looks
secret shows as its length); a project Compose refuses is one too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.compose import ComposeFile, ComposeService
from tierctl.compose.forms import (
    FormError,
    normalise_environment,
    normalise_labels,
    scalar_text,
    split_command,
)
from tierctl.compose.profiles import ProfileScope, enabled
from tierctl.contracts.compose_binary import (
    ComposeBinary,
    Runner,
    find_compose_binary,
    run_compose_config,
    run_process,
)
from tierctl.contracts.credentials import looks_secret_name
from tierctl.contracts.report import Violation

#: What the report says when no binary ran.
OWN_READER_ONLY = "compose: no compose binary found: tierctl's own reader only"
NOT_ASKED = "compose: tierctl's own reader only (the cross-check with a compose binary is off)"


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
        runner: runs the binary.
    """

    enabled: bool = True
    binary: str | Path | None = None
    runner: Runner = run_process

    def run(
        self,
        merged: ComposeFile,
        paths: Sequence[str | Path],
        scope: ProfileScope,
        *,
        refused: bool = False,
    ) -> CrossCheck:
        """Compare ``merged`` (tierctl's reading of ``paths``, references kept as written)
        with Compose's reading of the same files, under ``scope``'s profiles; ``refused``:
        tierctl's own checks already reject the file as compose would (TC007), so compose
        refusing it too is agreement, not a difference.

        Raises:
            InputError: ``binary`` does not run as Compose v2.
        """
        if not self.enabled:
            return CrossCheck((), NOT_ASKED)
        found = find_compose_binary(self.binary, runner=self.runner)
        if found is None:
            return CrossCheck((), OWN_READER_ONLY)
        return cross_check(merged, paths, scope, found, self.runner, refused=refused)


def cross_check(
    merged: ComposeFile,
    paths: Sequence[str | Path],
    scope: ProfileScope,
    found: ComposeBinary,
    runner: Runner = run_process,
    *,
    refused: bool = False,
) -> CrossCheck:
    """Compare tierctl's reading ``merged`` of ``paths`` with ``found``'s, project by project
    of ``scope`` (``refused`` as :meth:`ComposeCheck.run`)."""
    violations: list[Violation] = []
    # One run: without interpolation compose prints every service with its `profiles`
    # (it applies no profile then), so each project's services follow from them.
    config = run_compose_config(found, paths, runner=runner)
    if config.data is None and refused:
        return CrossCheck(
            (),
            f"compose: tierctl's reader; {found.title} at {found.where} refuses the project too",
        )
    if config.data is None:
        error = _first_lines(config.error or "")
        violations.append(
            Violation(
                rule="TC007",
                service=None,
                message=f"{found.title} refuses the project, which tierctl reads: {error}",
                location=merged.location(),
                found="tierctl reads it",
                expected=f"{found.title}: {error}",
                fix="fix what compose names (tierctl should refuse it too: report it)",
            )
        )
        return CrossCheck(
            tuple(violations),
            f"compose: tierctl's reader; {found.title} at {found.where} refuses the project",
        )
    raw = config.data.get("services")
    theirs = (
        {str(k): v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}
    )
    their_profiles = {n: tuple(str(p) for p in v.get("profiles") or ()) for n, v in theirs.items()}
    projects = [(s.label, s.profiles) for s in scope.sets()]
    if scope.active is None:  # a profile only compose sees is a project of its own
        for p in dict.fromkeys(p for ps in their_profiles.values() for p in ps):
            if p not in scope.named:
                projects.append((f"profile {p}", (p,)))
    for label, active in projects:
        where = f" in {label}" if scope.named or len(projects) > 1 else ""
        ours = [n for n, ps in scope.profiles.items() if enabled(ps, active)]
        compose_runs = [n for n, ps in their_profiles.items() if enabled(ps, active)]
        violations.extend(_service_sets(merged, found, ours, compose_runs, where))
    compared = [n for n in merged.services if n in theirs]
    for name in compared:
        violations.extend(compare_service(merged, found, name, theirs[name]))
    reader = (
        f"compose: tierctl's reader; cross-checked with {found.title} at {found.where}"
        f" ({len(compared)} service{'s' if len(compared) != 1 else ''} compared"
        f"{', ' + str(len(violations)) + ' difference(s)' if violations else ', no difference'})"
    )
    return CrossCheck(tuple(violations), reader)


def _first_lines(text: str) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[:3])


def _service_sets(
    merged: ComposeFile, binary: ComposeBinary, ours: list[str], theirs: list[str], label: str
) -> list[Violation]:
    out = []
    for name, who in [(n, "tierctl") for n in ours if n not in theirs] + [
        (n, binary.title) for n in theirs if n not in ours
    ]:
        other = binary.title if who == "tierctl" else "tierctl"
        out.append(
            Violation(
                rule="TC007",
                service=name,
                message=f"{who} runs service {name}{label} and {other} does not",
                location=merged.location("services", name),
                expected=f"{binary.title}: {'runs it' if name in theirs else 'does not run it'}",
                found=f"tierctl: {'runs it' if name in ours else 'does not run it'}",
                fix="check the service's profiles: (tierctl should read them as compose does)",
            )
        )
    return out


def compare_service(
    merged: ComposeFile, binary: ComposeBinary, name: str, theirs: dict[str, Any]
) -> list[Violation]:
    """Every compared value of one service: tierctl's reading against Compose's JSON."""
    ours = merged.services[name]
    out: list[Violation] = []
    for key, read in _READERS:
        mine, compose = read(ours.data, ours), read(theirs, None)
        if mine == compose:
            continue
        shown_mine, shown_theirs = _show(key, mine), _show(key, compose)
        out.append(
            Violation(
                rule="TC007",
                service=name,
                message=f"tierctl and {binary.title} read services.{name}.{key} differently: "
                f"tierctl reads {shown_mine}, {binary.title} reads {shown_theirs}",
                location=merged.location("services", name, key),
                expected=f"{binary.title}: {shown_theirs}",
                found=f"tierctl: {shown_mine}",
                fix="compose runs what it reads: write the value so both agree, and report "
                "tierctl's reading as a bug",
            )
        )
    return out


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
    """(host IP, published, target, protocol) of one port entry, a range expanded."""
    if isinstance(entry, dict):
        return [
            (
                str(entry.get("host_ip") or ""),
                scalar_text(entry.get("published")),
                scalar_text(entry.get("target")),
                str(entry.get("protocol") or "tcp"),
            )
        ]
    text = scalar_text(entry)
    if "$" in text:
        return [("", "", text, "")]  # a reference: compared as written
    text, _, protocol = text.partition("/")
    ip = ""
    if text.startswith("["):  # [::1]:8000:80
        ip, _, text = text[1:].partition("]")
        text = text.lstrip(":")
    parts = text.split(":")
    if len(parts) == 3:
        ip, published, target = parts
    elif len(parts) == 2:
        published, target = parts
    else:
        published, target = "", parts[0]
    targets, publisheds = _range(target), _range(published)
    if len(publisheds) == len(targets) > 1:
        pairs = list(zip(publisheds, targets, strict=True))
    else:
        pairs = [(published, t) for t in targets]
    return [(ip, p, t, protocol or "tcp") for p, t in pairs]


def _range(text: str) -> list[str]:
    low, sep, high = text.partition("-")
    if sep and low.isdigit() and high.isdigit() and int(low) <= int(high) < int(low) + 1000:
        return [str(n) for n in range(int(low), int(high) + 1)]
    return [text]


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
