"""Validating compose files that have no tier spec: ``tierctl validate COMPOSE...``.

Without a spec there is nothing to pin argv or variants against, but most of what breaks a
serving tier is visible in the file alone. This module finds the engine services (by image and
by the launcher their command runs, per the engine profiles), picks each one's flag catalog
(from the image tag, or ``--engine sglang==X``) and runs:

- TC007 schema, plus compose's own consistency rule that a service only references
  declared top-level volumes, networks, secrets and configs;
- TC004 engine-flag-catalog on each engine's flags;
- TC006 hygiene: GPUs reserved twice, an engine's TP x PP x DP against the GPUs it is given,
  host ports published twice (and ``--port``/``--dist-init-addr`` on the host network),
  literal credentials, commands compose cuts at ``;&|<>``, volume container paths that are
  not absolute or climb with ``..``; images not pinned by digest are
  warnings here (a hand-written file rarely pins them; a spec's render does).

The report names what it could not check (the spec-only contracts, engines whose release has
no shipped catalog, GPU counts given as ``count: all``), so "ok" never claims more than ran.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.catalog.refs import parse_ref
from tierctl.catalog.store import catalog_for_image, resolve_catalog
from tierctl.compose import ComposeFile, ComposeService, load_compose, merge_compose
from tierctl.compose.argv import FlagUse, parse_flags
from tierctl.compose.forms import referenced_resources
from tierctl.compose.profiles import ProfileScope
from tierctl.compose.shellwords import ShellWordsError, split_shell_words
from tierctl.contracts import flag_catalog, hygiene, schema
from tierctl.contracts.crosscheck import ComposeCheck
from tierctl.contracts.report import RULES, Report, Violation
from tierctl.engine_catalog import Catalog
from tierctl.engines import PROFILES, EngineProfile, profile_for_argv
from tierctl.errors import InputError

#: Contracts that need a spec to mean anything (what the spec promised vs the file).
SPEC_ONLY = ("TC001", "TC002", "TC003", "TC005")


@dataclass(frozen=True)
class EngineService:
    """One engine service found in a file without a spec."""

    name: str
    service: ComposeService
    profile: EngineProfile
    argv: tuple[str, ...]  # the command as it runs (image entrypoint + command when split)
    command_offset: int  # index in argv of command[0] (for locating tokens)
    flag_start: int
    version: str | None
    catalog: Catalog | None
    uses: tuple[FlagUse, ...] = field(default=())
    flags: dict[str, Any] = field(default_factory=dict)
    #: Index in ``command`` of the one shell-script token the engine runs in (``sh -c "..."``)
    #: whose words the flags were read from; None when the command is the argv itself.
    shell_token: int | None = None
    #: Why the catalog is not the image tag's own release (the newest shipped one stands in
    #: for ``latest``, ``main``, an unshipped release), said as a warning; None when it is.
    catalog_note: str | None = None


def find_engines(
    compose: ComposeFile, engine: str | None = None, *, skip: Collection[str] = ()
) -> tuple[list[EngineService], list[str]]:
    """The engine services of a file, each with its catalog; and what could not be checked.

    Args:
        compose: the (merged) file.
        engine: ``KIND==VERSION`` or a catalog file forcing the catalog (``--engine``).
        skip: services not to look at (a caller that read them already).

    Raises:
        InputError: ``--engine`` names no shipped catalog or unreadable file.
    """
    forced = resolve_catalog(engine) if engine else None
    found: list[EngineService] = []
    unchecked: list[str] = []
    for name, service in compose.services.items():
        if name in skip:
            continue
        profile, argv, offset = _engine_of(service)
        if profile is None:
            continue
        version = profile.image_version(service.image)
        catalog: Catalog | None = None
        note: str | None = None
        if forced is not None and forced.engine == profile.kind:
            catalog, version = forced, forced.version
        else:
            catalog, note = catalog_for_image(profile.kind, version, service.image)
            if catalog is None:
                unchecked.append(
                    f"{name}: engine flags (TC004): no shipped catalog of {profile.kind}; "
                    f"pass `engine` {profile.kind}==VERSION (a catalog file)"
                )
        shell_token = None
        inner = _shell_script_argv(profile, argv)
        if inner is not None:
            index, argv = inner
            shell_token, offset = index - offset, 0
        start = profile.split_command(argv).flags_start
        uses = tuple(parse_flags(argv, start, catalog))
        flags = profile.command_flags(argv, catalog)
        found.append(
            EngineService(
                name,
                service,
                profile,
                argv,
                offset,
                start,
                version,
                catalog,
                uses,
                flags,
                shell_token,
                note,
            )
        )
    return found, unchecked


def shell_script_argv(
    profile: EngineProfile, argv: tuple[str, ...]
) -> tuple[int, tuple[str, ...]] | None:
    """(token index, words) of the engine command inside a shell script token
    (``sh -c "pip install x && python3 -m sglang.launch_server --tp 2"``), split by the same
    go-shellwords rules, one ``;&|`` segment at a time; None when the argv has flags itself."""
    if profile.split_command(argv).flags_start < len(argv):
        return None
    for i, token in enumerate(argv):
        if not any(c.isspace() for c in token):
            continue
        # A backslash before a newline continues the line in a shell script (sh removes both).
        rest = token.replace("\\\n", "")
        while rest:
            # A newline ends a command in a script, as ; does: one line at a time, unless
            # a quote runs on past the line's end.
            line, newline, after = rest.partition("\n")
            try:
                words, cut = split_shell_words(line)
                rest = (line[cut:] + newline + after) if cut >= 0 else after
            except ShellWordsError:
                try:
                    words, cut = split_shell_words(rest)
                except ShellWordsError:
                    break
                rest = rest[cut:] if cut >= 0 else ""
            if words and profile.matches_command(words):
                return i, tuple(words)
            rest = rest.lstrip(";&|<> \t\n")
    return None


_shell_script_argv = shell_script_argv  # the name this module's own callers use


def _engine_of(service: ComposeService) -> tuple[EngineProfile | None, tuple[str, ...], int]:
    """The engine a service runs, its whole argv, and where its ``command`` starts in it."""
    entry = service.entrypoint or ()
    command = service.command or ()
    whole = (*entry, *command)
    profile = profile_for_argv(whole)
    if profile is not None:
        return profile, whole, len(entry)
    for candidate in PROFILES.values():
        if candidate.matches_image(service.image) and not _other_module(whole):
            if entry or not candidate.image_launcher:
                return candidate, whole, len(entry)
            # The image's ENTRYPOINT runs the launcher; the command is its arguments.
            launcher = candidate.image_launcher
            sub = launcher[1:]
            if (
                sub
                and not candidate.image_entrypoint(service.image)
                and tuple(command[: len(sub)]) == sub
            ):
                # An image of the engine's own build (myorg/vllm) whose ENTRYPOINT is the
                # program: `command: serve MODEL ...` runs `vllm serve MODEL ...`.
                launcher = launcher[:1]
            return candidate, (*launcher, *command), len(launcher)
    return None, whole, 0


def _other_module(argv: tuple[str, ...]) -> bool:
    """Whether a command runs a Python module no engine profile launches
    (``python3 -m sglang_router.launch_router`` in an SGLang image is the router, not the
    engine): the image alone then does not make the service an engine."""
    return (
        len(argv) >= 3
        and argv[0].rsplit("/", 1)[-1].startswith("python")
        and argv[1] == "-m"
        and profile_for_argv(argv) is None
    )


def validate_files(
    paths: Sequence[str | Path],
    *,
    engine: str | None = None,
    strict: bool = False,
    profiles: Sequence[str] | None = None,
    compose_check: ComposeCheck | None = None,
) -> Report:
    """``tierctl validate COMPOSE...`` without ``--spec``.

    Args:
        paths: compose files, merged like ``docker compose -f a -f b``.
        engine: ``KIND==VERSION`` (or a catalog file) for engines whose image tag names no
            release with a shipped catalog.
        strict: warnings (unpinned images) count as violations.
        profiles: the active compose profiles; None: the checks that compare services look
            at the default set and each profile's set separately.
        compose_check: whether (and with which binary) to cross-check tierctl's reading with
            the real Compose; default: not.

    Raises:
        ComposeInputError / InputError: unusable input (exit 2).
    """
    if not paths:
        raise InputError(
            "nothing to validate",
            rule="usage",
            fix="pass the compose files to check in `paths`",
            params=("paths",),
        )
    if engine and "==" in engine:
        parse_ref(engine)  # a clear error for a bad KIND==VERSION before reading files
    files = [load_compose(Path(p), overlay=i > 0) for i, p in enumerate(paths)]
    merged = merge_compose(files)
    scope = ProfileScope.of(merged, profiles)
    engines, unchecked = find_engines(merged, engine)
    violations: list[Violation] = []
    warnings: list[Violation] = []
    violations.extend(schema.check_document(merged))
    violations.extend(schema.equal_items(files, violations))
    violations.extend(undeclared_references(merged))
    violations.extend(hygiene.container_names(merged, scope))
    violations.extend(hygiene.dependencies(merged, scope))
    warnings.extend(catalog_notes(merged, engines))
    for e in engines:
        if e.catalog is not None:
            violations.extend(
                flag_catalog.check_uses(
                    e.catalog, merged, e.name, e.uses, e.command_offset, at=e.shell_token
                )
            )
    violations.extend(doubled_launchers(merged))
    violations.extend(hygiene.gpus(merged, scope))
    gpu_violations, gpu_unchecked = gpu_fit(merged, engines)
    for finding in gpu_violations:
        (
            warnings
            if finding.expected and finding.found and int(finding.expected) < int(finding.found)
            else violations
        ).append(finding)
    unchecked.extend(gpu_unchecked)
    host = [(e.name, e.flags) for e in engines if e.service.data.get("network_mode") == "host"]
    violations.extend(hygiene.ports(merged, host, scope))
    violations.extend(
        hygiene.secrets(merged, {e.name: e.catalog for e in engines if e.catalog is not None})
    )
    violations.extend(hygiene.healthcheck_ports(merged, [_listens(e) for e in engines]))
    violations.extend(hygiene.cut_commands(merged))
    violations.extend(hygiene.mount_targets(merged))
    for finding in hygiene.images(merged):
        # A local build is as unpinned as a tag (a warning; a violation under `strict`), and
        # the contracts with a spec still refuse it.
        (violations if strict else warnings).append(finding)
    if not engines:
        unchecked.append(_no_engine(merged))
    unchecked.append(
        "spec contracts ("
        + ", ".join(f"{r} {RULES[r]}" for r in SPEC_ONLY)
        + "): need a tier spec; `tierctl import` writes one from this file"
    )
    # Last: the whole reading stops at the first refusal, which the checks above may name.
    violations.extend(schema.project_refusals(paths, violations, profiles))
    checked = (compose_check or ComposeCheck(enabled=False)).run(
        merged, paths, scope, refused=any(v.rule == "TC007" for v in violations)
    )
    violations.extend(checked.violations)
    return Report(
        spec="(none)",
        files=tuple(f.source for f in files),
        catalog=", ".join(sorted({e.catalog.ref for e in engines if e.catalog})) or None,
        services_checked=len(merged.services),
        replicas_checked=len(engines),
        violations=tuple(violations),
        warnings=tuple(warnings),
        unchecked=tuple(unchecked),
        params=("engine",),
        reader=checked.reader,
        profiles=scope.describe(),
    )


def catalog_notes(compose: ComposeFile, engines: Sequence[EngineService]) -> Iterator[Violation]:
    """A warning for each engine whose flags were checked against another release's catalog
    than its image tag's (the newest shipped one, for ``latest`` or an unshipped release)."""
    for e in engines:
        if e.catalog_note is not None:
            yield Violation(
                rule="TC004",
                service=e.name,
                message=e.catalog_note,
                location=compose.location("services", e.name, "image"),
                found=e.service.image,
                fix=f"pin the release in the image tag, or pass `engine` {e.profile.kind}==VERSION",
            )


def doubled_launchers(compose: ComposeFile) -> Iterator[Violation]:
    """A command that starts the engine's launcher on an image whose ENTRYPOINT already runs
    one (``command: [vllm, serve, ...]`` on ``vllm/vllm-openai``): Docker runs
    ``vllm serve vllm serve ...`` and the engine refuses ``serve`` as an argument."""
    for name, service in compose.services.items():
        if service.entrypoint is not None or "entrypoint" in service.data:
            continue  # the file's own entrypoint (even []) replaces the image's
        for profile in PROFILES.values():
            doubled = profile.doubled_launcher(service.image, service.command or ())
            if not doubled:
                continue
            entry = " ".join(profile.image_entrypoint(service.image))
            yield Violation(
                rule="TC006",
                service=name,
                message=f"the image's entrypoint already runs `{entry}`, and the command "
                f"starts with `{' '.join(doubled)}` too: the container runs "
                f"`{entry} {' '.join(doubled)} ...`",
                location=compose.location("services", name, "command", 0),
                found=" ".join(doubled),
                fix=f"drop `{' '.join(doubled)}` from command (give the arguments only), or "
                "set entrypoint: [] to run the command as written",
            )


def undeclared_references(compose: ComposeFile) -> Iterator[Violation]:
    """A service may only use named volumes, networks, secrets and configs the file declares
    (compose refuses the file otherwise: "refers to undefined volume")."""
    declared = {
        kind: set(_as_map(compose.data.get(kind)))
        for kind in ("volumes", "networks", "secrets", "configs")
    }
    declared["networks"].add("default")
    for name, service in compose.services.items():
        for key, index, ref in referenced_resources(service.data):
            if ref not in declared[key]:
                yield _undeclared(compose, name, key, index, key[:-1], ref)


def _undeclared(
    compose: ComposeFile, service: str, key: str, index: int | None, what: str, name: str
) -> Violation:
    path: tuple[str | int, ...] = ("services", service, key) + (
        (index,) if index is not None else ()
    )
    top = f"{what}s"
    return Violation(
        rule="TC007",
        service=service,
        message=f"service {service} refers to undefined {what} {name!r}",
        location=compose.location(*path),
        found=name,
        fix=f"declare it at the top level: {top}: {{{name}: {{}}}}",
    )


def _no_engine(merged: ComposeFile) -> str:
    """What is not checked in a file without an SGLang or vLLM engine, naming the inference
    servers it runs that tierctl has no profile for."""
    from tierctl.engines.foreign import foreign_engine

    seen = [
        f"{name} runs {found.title}"
        for name, svc in merged.services.items()
        if (found := foreign_engine(svc.image, (*(svc.entrypoint or ()), *(svc.command or ()))))
    ]
    return "engine checks: no service runs SGLang or vLLM (by image or launcher)" + (
        f"; {', '.join(seen)}, which tierctl has no engine profile for" if seen else ""
    )


def _listens(e: EngineService) -> tuple[str, int | None]:
    """(service, the port its engine listens on: its --port, else the engine's default; None
    where the value is not a number written in the file)."""
    value = e.flags.get("port", e.profile.default_port)
    try:
        return e.name, int(value)
    except (TypeError, ValueError):
        return e.name, None


def service_gpus(service: ComposeService) -> tuple[int | None, str | None]:
    """How many GPUs a service is given, or (None, why) when the file does not say."""
    if service.gpu_ids:
        return len(service.gpu_ids), None
    resources = _as_map(_as_map(service.data.get("deploy")).get("resources"))
    devices = _as_map(resources.get("reservations")).get("devices")
    for device in devices if isinstance(devices, list) else []:
        count = device.get("count") if isinstance(device, dict) else None
        if count == "all" or count == -1:
            return None, "reserves count: all (the host's GPU count is not in the file)"
        if isinstance(count, int):
            return count, None
        if isinstance(count, str) and count.isdigit():
            return int(count), None
    gpus = service.data.get("gpus")
    if gpus == "all":
        return None, "reserves gpus: all (the host's GPU count is not in the file)"
    env = service.environment
    for key in (
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
    ):
        value = env.get(key)
        if value and "$" not in value and value != "all":
            return len([v for v in value.split(",") if v.strip()]), None
    return None, "reserves no GPUs in deploy.resources.reservations.devices"


def gpu_fit(
    compose: ComposeFile, engines: Sequence[EngineService]
) -> tuple[list[Violation], list[str]]:
    """Each engine's TP x PP x DP (per node) against the GPUs its service is given."""
    out: list[Violation] = []
    unchecked: list[str] = []
    for e in engines:
        needed = e.profile.gpus_needed(e.flags)
        have, why = service_gpus(e.service)
        if needed is None:
            unchecked.append(f"{e.name}: GPU fit: a parallelism flag is not a number")
            continue
        if have is None:
            unchecked.append(f"{e.name}: GPU fit (needs {needed}): {why}")
            continue
        if needed != have:
            more = "only " if needed > have else ""
            out.append(
                Violation(
                    rule="TC006",
                    service=e.name,
                    message=f"{e.profile.title} needs {needed} GPUs (TP x PP x DP from its "
                    f"flags) but the service is given {more}{have}",
                    location=compose.location("services", e.name, "deploy"),
                    expected=str(needed),
                    found=str(have),
                    fix=f"reserve {needed} GPUs (device_ids) or change the parallel sizes",
                )
            )
    return out, unchecked


# A file that breaks the compose schema is reported by the schema contract; the checks here
# still run on it, so they read each key only in the shape compose allows and skip the rest.
def _as_map(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
