"""``tierctl import``: bring an existing compose file under tierctl as a tier spec.

The file is read exactly as compose reads it (include, extends, ``!reset``, override files
merged) with every string kept as written (:attr:`Interpolation.AS_WRITTEN`), so ``${VAR}``
and ``$$`` reach the spec, and the rendered file, unchanged. The engine services (found by
image and launcher, as ``validate`` finds them) of the most common engine become replicas of
one engine: the flags, environment and compose keys they share become the engine's, the rest
each replica's overrides. Every other service is kept as it is, as a spec service.

The result is checked before it is returned: the spec loads (every spec rule holds), and its
rendering is semantically equal to the input (:func:`tierctl.spec.semantic_diff.semantic_diff`:
tierctl's own labels and project name aside). Anything the spec cannot say is refused with
the service and key named, never dropped silently.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.catalog.store import load_catalog, newest_shipped, shipped
from tierctl.compose import ComposeFile, Interpolation, load_compose, merge_compose, parse_compose
from tierctl.compose.argv import parse_flags
from tierctl.compose.long_forms import rebase_service
from tierctl.compose.profiles import only_active
from tierctl.contracts.hygiene import secrets as literal_secrets
from tierctl.contracts.standalone import EngineService, find_engines
from tierctl.credentials import literal_secret, secret_positions, shown_value
from tierctl.engine_catalog import Catalog
from tierctl.engines import profile_for
from tierctl.errors import ComposeInputError, InputError, Location
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec.effective import AMD_DEVICES, AMD_VISIBLE, ARGV_SLOT, shell_join
from tierctl.spec.loader import load_spec_text
from tierctl.spec.semantic_diff import semantic_diff
from tierctl.spec.tier_spec import TierSpec

_REPLICA = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# A GPU index as compose's device_ids give it: ASCII digits, a handful of them ("²" is a
# digit to str.isdigit but not to int()).
_GPU_INDEX = re.compile(r"^[0-9]{1,6}$")
_TIER = re.compile(r"[^a-z0-9_-]+")
# Keys of an engine service the spec derives (engine.*, replica args/env/gpus).
_DERIVED = ("image", "container_name", "command", "entrypoint", "environment")
_ROLES = (
    ("nginx", "nginx"),
    ("haproxy", "proxy"),
    ("traefik", "proxy"),
    ("envoy", "proxy"),
    ("litellm", "proxy"),
    ("router", "proxy"),
    ("prometheus", "collector"),
    ("otel", "collector"),
    ("grafana/alloy", "collector"),
    ("dcgm-exporter", "gpu-exporter"),
    ("nvidia_gpu_exporter", "gpu-exporter"),
)


@dataclass(frozen=True)
class SecretReference:
    """A literal credential of the file, imported as a ``${var:?...}`` reference.

    Attributes:
        service: the service that held it.
        where: ``environment KEY`` or ``command token N``.
        var: the variable to set where compose runs (the value is written nowhere).
    """

    service: str
    where: str
    var: str


@dataclass
class Adoption:
    """What ``tierctl import`` produced.

    ``notes`` holds one warning line per thing the import kept as written, converted or could
    not check; ``references`` the credentials it turned into references, ``rebased`` the
    relative paths it rewrote for the spec's folder (``(service or key, old, new)``).
    """

    spec: TierSpec
    text: str  # the tier.yaml
    rendered: str  # the spec's rendering
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # round trip; empty when equivalent
    references: list[SecretReference] = field(default_factory=list)
    rebased: list[tuple[str, str, str]] = field(default_factory=list)


def adopt(
    paths: Sequence[str | Path],
    *,
    out: str | Path,
    tier: str | None = None,
    host: str = "localhost",
    engine: str | None = None,
    engine_services: Sequence[str] = (),
    profiles: Sequence[str] | None = None,
) -> Adoption:
    """Write a tier spec for compose files (merged like ``docker compose -f a -f b``).

    Args:
        paths: the compose files.
        out: where the spec will live (its ``output`` is relative to that folder; relative
            host paths of the files are rebased onto it).
        tier: tier name; default: the file's ``name:``, else its folder's name (compose's
            project name, so named volumes keep their names).
        host: the host the tier runs on.
        engine: ``KIND==VERSION`` when the engine image tag names no release (default: the
            newest shipped release of the engine, said in a note).
        engine_services: services that run the engine although neither their image nor
            their command names a known launcher (a custom image, an entrypoint script).
        profiles: the active compose profiles: only the services compose runs with them are
            imported (``docker compose --profile P``); None: every service.

    Raises:
        InputError / ComposeInputError: a file compose would refuse, or something the spec
            cannot express (named, with the fix).
    """
    if not paths:
        raise InputError("nothing to import", rule="usage", fix="pass a compose file")
    _refuse_what_compose_refuses(paths, profiles)
    files = _read_as_written(paths)
    merged = only_active(merge_compose(files), profiles)
    _refuse_schema_errors(merged)
    notes: list[str] = []
    out_path = Path(out)
    references: list[SecretReference] = []
    rebased: list[tuple[str, str, str]] = []
    project_dir = Path(paths[0]).resolve().parent
    merged = _prepared(merged, project_dir, out_path.resolve().parent, references, rebased)
    notes += _preparation_notes(references, rebased, project_dir, out_path)
    for finding in literal_secrets(merged):
        raise InputError(
            finding.message,
            location=finding.location,
            rule="no literal credentials in a spec",
            fix=finding.fix or "use a ${VAR} reference",
        )
    tails = _argv_tails(merged)
    engines = _engines(_without_tails(merged, tails), engine, engine_services)
    group = _replica_group(engines, notes, tails)
    _name_foreign_engines(merged, group, notes)
    if not group and engines:
        e = engines[0]
        heads = {launcher[0] for launcher in e.profile.launchers}
        at = next((i for i, t in enumerate(e.argv) if t.rsplit("/", 1)[-1] in heads), 0)
        raise InputError(
            f"service {e.name} runs {e.profile.title} inside a shell script whose engine "
            "command tierctl cannot render back as written (quoted words, or a command over "
            "several lines), and no other service runs an engine",
            location=merged.location("services", e.name, "command"),
            rule="import renders every engine command token for token as the file has it",
            value=" ".join(e.argv[at:]),
            fix="write the engine command in the script on one line of plain words (as "
            f"`{shell_join(e.argv[at:])}`), or keep this file as it is",
        )
    if not group:
        raise InputError(
            "no engine service found (no SGLang or vLLM image or launcher in any service)",
            location=Location(file=merged.source),
            rule="import needs at least one engine service",
            fix="mark the service that runs the engine with `engine_services` NAME "
            "or pass `engine` KIND==VERSION (e.g. sglang==0.5.23) with it",
            params=("engine_services", "engine"),
        )
    version = _version(group[0], notes, engine is not None and "==" in engine)
    doc = _spec_document(merged, group, version, out_path, tier, host, notes)
    if group[0].name in tails:
        doc["engine"]["argv_tail"] = tails[group[0].name]
        notes.append(
            f"{group[0].name}: the command ends in {tails[group[0].name]!r}, words compose "
            "makes only once the variables are set: kept as written after the flags (the "
            "command is rendered as one string; those words' flags are not checked)"
        )
    if _string_commands(merged, group):
        doc["engine"]["command_string"] = True
    text = _header(files) + dump_yaml(doc)
    spec = load_spec_text(text, str(out_path))
    rendered = render_compose(spec, spec_path=out_path)
    again = parse_compose(rendered, source="(rendered)", interpolation=Interpolation.AS_WRITTEN)
    differences = semantic_diff(merged, again) + _argv_differences(merged, again)
    return Adoption(spec, text, rendered, notes, differences, references, rebased)


def _read_as_written(paths: Sequence[str | Path]) -> list[ComposeFile]:
    """The files as written; where an included or extended file lives in another folder (or
    an include names a project_directory), its services' relative paths are made absolute
    from that folder, as Compose resolves them (the project's own stay relative)."""
    # A file after the first is an override: a `null` service there keeps the earlier one.
    files = [
        load_compose(Path(p), interpolation=Interpolation.AS_WRITTEN, overlay=i > 0)
        for i, p in enumerate(paths)
    ]
    if not any(_reads_other_folders(f) for f in files):
        return files
    return [
        load_compose(Path(p), interpolation=Interpolation.AS_WRITTEN, rebase=True, overlay=i > 0)
        for i, p in enumerate(paths)
    ]


def _reads_other_folders(compose: ComposeFile) -> bool:
    """Whether the file includes or extends a file in another folder, or names an include's
    project_directory (``raw``: the document before includes and extends were applied is
    not kept, so each file's text is read for the keys)."""
    from tierctl.readers import load_yaml

    for source, text in compose.texts:
        if "include" not in text and "extends" not in text:
            continue
        try:
            # Bounded and located like every read (the file was read once already).
            data = load_yaml(text, source, duplicates=False).data
        except InputError:
            continue
        if not isinstance(data, dict):
            continue
        named: list[Any] = []
        for entry in data.get("include") or [] if isinstance(data.get("include"), list) else []:
            if isinstance(entry, dict):
                if "project_directory" in entry:
                    return True
                entry = entry.get("path")
            named += entry if isinstance(entry, list) else [entry]
        for svc in (
            (data.get("services") or {}).values() if isinstance(data.get("services"), dict) else []
        ):
            extends = svc.get("extends") if isinstance(svc, dict) else None
            if isinstance(extends, dict):
                named.append(extends.get("file"))
        if any(isinstance(n, str) and Path(n).parent != Path(".") for n in named):
            return True
    return False


def _preparation_notes(
    references: list[SecretReference],
    rebased: list[tuple[str, str, str]],
    project_dir: Path,
    out_path: Path,
) -> list[str]:
    """The notes on what the import rewrote before reading the file (credentials, relative
    paths), and on a project .env the rendering's folder does not have."""
    out: list[str] = []
    out += [
        f"{r.service}: {r.where} held a literal credential: imported as ${{{r.var}:?...}}; "
        f"set {r.var} where compose runs (the value is written nowhere)"
        for r in references
    ]
    out += [
        f"{who}: relative path {old} rebased to {new} (the spec's folder)"
        for who, old, new in rebased
    ]
    dotenv = project_dir / ".env"
    if dotenv.is_file() and out_path.resolve().parent != project_dir:
        out.append(
            f"{dotenv}: compose reads the project's .env for the file's ${{...}}, and the "
            "rendering lives in the spec's folder: copy it there, or run compose with "
            f"--env-file {dotenv}"
        )
    return out


def _argv_differences(merged: ComposeFile, again: ComposeFile) -> list[str]:
    """Every service's ``entrypoint`` and ``command`` compared token for token: the engine
    reading two orders alike does not make them the same file (``plan`` compares them so)."""
    out: list[str] = []
    for name, service in merged.services.items():
        other = again.services.get(name)
        if other is None:
            continue  # semantic_diff says so
        for key, mine, theirs in (
            ("entrypoint", service.entrypoint, other.entrypoint),
            ("command", service.command, other.command),
        ):
            if tuple(mine or ()) != tuple(theirs or ()):
                out.append(
                    f"services.{name}.{key}: {list(mine or ())} != {list(theirs or ())} "
                    "(the rendering writes the tokens in another order or form)"
                )
    return out


def _version(first: EngineService, notes: list[str], forced: bool) -> str:
    """The release the spec pins: ``engine``'s, the engine image tag's, else the newest
    shipped one (noted). Another image's tag (a custom image that runs the engine's launcher)
    says nothing about the engine's release."""
    own = first.profile.matches_image(first.service.image)
    kind = first.profile.kind
    if first.version is not None and (own or forced):
        if (kind, first.version) not in shipped():
            notes.append(
                f"{first.name}: no shipped catalog for {kind}=={first.version}: the spec "
                f"pins it as the tag says; `tierctl catalog build {kind}=={first.version}` "
                "builds one (validate without the spec checks the newest shipped release)"
            )
        return first.version
    newest = newest_shipped(kind)
    if newest is None:
        raise InputError(
            f"the image {first.service.image!r} names no {first.profile.title} release and "
            "no catalog of it is shipped",
            location=Location(file="(import)"),
            rule="a spec pins the engine release",
            fix=f"pass `engine` {kind}==VERSION",
            params=("engine",),
        )
    what = "names no release" if own else f"is not a {first.profile.title} image"
    notes.append(
        f"{first.name}: image {first.service.image!r} {what}: kept as written; "
        f"flags checked against the newest shipped {first.profile.kind} release {newest} "
        f"(pass `engine` {first.profile.kind}==VERSION to pick another)"
    )
    return newest


def _engines(merged: ComposeFile, engine: str | None, marked: Sequence[str]) -> list[EngineService]:
    """The engine services: found by image or launcher, plus the ones ``marked`` by name."""
    for name in marked:
        if name not in merged.services:
            raise InputError(
                f"no service {name!r} to mark as the engine",
                location=merged.location("services"),
                rule="`engine_services` names services of the file",
                value=name,
                fix=f"pick one of: {', '.join(merged.services)}",
                params=("engine_services",),
            )
    found, _ = find_engines(merged, engine)
    known = {e.name for e in found}
    extra = [_marked(merged, n, engine) for n in marked if n not in known]
    return [*found, *extra]


def _marked(merged: ComposeFile, name: str, engine: str | None) -> EngineService:
    """A service the user says runs the engine: its argv read with the engine's profile."""
    kind, _, version = (engine or "").partition("==")
    if not kind:
        raise InputError(
            f"service {name} is marked as the engine, but which engine is not said",
            location=merged.location("services", name),
            rule="a marked engine service needs its engine",
            fix="pass `engine` KIND==VERSION too (e.g. vllm==0.11.0)",
            params=("engine",),
        )
    profile = profile_for(kind)
    service = merged.services[name]
    entry = service.entrypoint or ()
    argv = (*entry, *(service.command or ()))
    version = version or profile.image_version(service.image) or ""
    catalog: Catalog | None = None
    if version and (kind, version) in shipped():
        catalog = load_catalog(kind, version)
    start = profile.split_command(argv).flags_start
    return EngineService(
        name,
        service,
        profile,
        argv,
        len(entry),
        start,
        version or None,
        catalog,
        tuple(parse_flags(argv, start, catalog)),
        profile.command_flags(argv, catalog),
    )


_MISSING = re.compile(r"^required variable ([A-Za-z_][A-Za-z0-9_]*) is missing a value")


def _refuse_what_compose_refuses(
    paths: Sequence[str | Path], profiles: Sequence[str] | None
) -> None:
    """Read the project as ``docker compose config`` does (``compose.project``) and raise
    its refusal, in Compose's words: a service an included file defines redefined here, a
    container name two services take, a required ``env_file`` that is not there. A required
    variable (``${HF_TOKEN:?...}``) unset in this shell is not the file's fault: it is read
    as set, as where the tier runs."""
    from tierctl.compose.project import ProjectOptions, project_config

    environ = dict(os.environ)
    active = tuple(profiles) if profiles is not None else ("*",)
    for _ in range(256):
        try:
            project_config(list(paths), ProjectOptions(profiles=active, environ=environ))
            return
        except ComposeInputError as exc:
            missing = _MISSING.match(exc.message)
            if missing is None or missing.group(1) in environ:
                raise
            environ[missing.group(1)] = "set-where-compose-runs"


def _name_foreign_engines(
    merged: ComposeFile, group: list[EngineService], notes: list[str]
) -> None:
    """Refuse a project whose only inference servers have no tierctl profile (TGI,
    TensorRT-LLM, llama.cpp, Ollama...), naming them; note the ones kept as services."""
    foreign = _foreign_engines(merged)
    if not group and foreign:
        seen = "; ".join(f"service {name} runs {what}" for name, what in foreign.items())
        raise InputError(
            f"no SGLang or vLLM engine in this project: {seen}, which tierctl has no engine "
            "profile for (its flags, endpoints and metrics are not known)",
            location=merged.location("services", next(iter(foreign))),
            rule="import adopts SGLang or vLLM tiers",
            value=", ".join(dict.fromkeys(foreign.values())),
            fix="keep this deployment as it is; a service that does run SGLang or vLLM is "
            "marked with `engine_services` NAME and `engine` KIND==VERSION",
            params=("engine_services", "engine"),
        )
    notes += [
        f"{name}: runs {what} (no tierctl engine profile): kept as a service as written"
        for name, what in foreign.items()
        if name not in {e.name for e in group}
    ]


def _foreign_engines(merged: ComposeFile) -> dict[str, str]:
    """The services that run an inference server tierctl has no profile for (TGI,
    TensorRT-LLM, llama.cpp, Ollama...), by name: what they run."""
    from tierctl.engines.foreign import foreign_engine

    out: dict[str, str] = {}
    for name, svc in merged.services.items():
        found = foreign_engine(svc.image, (*(svc.entrypoint or ()), *(svc.command or ())))
        if found is not None:
            out[name] = found.title
    return out


def _refuse_schema_errors(merged: ComposeFile) -> None:
    """Refuse a file compose itself would refuse (the compose schema), before any part of it
    is read as a replica: ``deploy.resources: x`` or ``logging: [..]`` are then named with
    their line instead of reaching the grouping code with the wrong shape."""
    from tierctl.contracts.schema import type_errors

    for violation in type_errors(merged):
        raise InputError(
            f"compose refuses this value: {violation.message}",
            location=violation.location or Location(file=merged.source),
            rule="import reads files `docker compose config` accepts (the compose schema)",
            fix="fix the key (see the compose specification), or run `tierctl validate` on "
            "the file for every schema error",
        )


def _header(files: Sequence[ComposeFile]) -> str:
    names = ", ".join(f.source for f in files)
    return f"# Imported by `tierctl import` from {names}.\n"


_REFERENCE_IN = re.compile(r"(?<!\$)(?:\$\$)*\$[{A-Za-z_]")


def _string_commands(merged: ComposeFile, group: list[EngineService]) -> bool:
    """Whether every replica's command is a string with a ``${...}`` in it: compose splits
    such a string only after interpolating it (an unset variable gives no word), so the
    rendering keeps the string form (``engine.command_string``)."""
    if any(e.shell_token is not None for e in group):
        return False
    commands = [merged.services[e.name].data.get("command") for e in group]
    return all(isinstance(c, str) and _REFERENCE_IN.search(c) for c in commands)


def _argv_tails(merged: ComposeFile) -> dict[str, str]:
    """The services whose string ``command`` ends in words that are each one whole
    ``${...}`` reference (``${QUANT:+--quantization ${QUANT}}``, ``${EXTRA_ARGS}``): compose
    splits the string after interpolation, so these give as many words as their values
    have. By service: that tail, as written."""
    out: dict[str, str] = {}
    for name, svc in merged.services.items():
        command = svc.data.get("command")
        if isinstance(command, str):
            _, tail = _reference_tail(command)
            if tail:
                out[name] = tail
    return out


def _reference_tail(line: str) -> tuple[str, str]:
    """``line`` split before its trailing run of whole-reference words (head, tail)."""
    end = len(line.rstrip())
    cut = end
    while cut > 0 and line[cut - 1] == "}":
        depth, i = 0, cut - 1
        while i >= 0:
            if line[i] == "}":
                depth += 1
            elif line[i] == "{" and i > 0 and line[i - 1] == "$":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        start = i - 1  # the '$'
        inner = line[i + 1 : cut - 1]
        if (
            i < 1
            or any(q in inner for q in "'\"`")
            or (start > 0 and not line[start - 1].isspace())
        ):
            break
        before = line[:start].split()
        flag_value = bool(before) and before[-1].startswith("-") and "=" not in before[-1]
        if flag_value and not any(c.isspace() for c in inner) and "--" not in inner:
            break  # `--model ${MODEL}`: the flag's value, one word
        cut = start
        while cut > 0 and line[cut - 1].isspace():
            cut -= 1
    return line[:cut], line[cut:end].strip()


def _without_tails(merged: ComposeFile, tails: dict[str, str]) -> ComposeFile:
    """The file with each tail taken off its service's command (to find the engines and
    their flags in what is left)."""
    if not tails:
        return merged
    data = dict(merged.data)
    services = dict(data.get("services") or {})
    for name in tails:
        head, _ = _reference_tail(str(services[name]["command"]))
        services[name] = {**services[name], "command": head}
    data["services"] = services
    return ComposeFile.from_data(merged.source, data, merged.texts, as_written=merged.as_written)


def _replica_group(
    engines: list[EngineService], notes: list[str], tails: dict[str, str] | None = None
) -> list[EngineService]:
    """The engine services that become replicas: the most common engine with one launcher
    (and one shell script around it, for engines started inside one)."""
    if not engines:
        return []
    usable: list[EngineService] = []
    for e in engines:
        if e.shell_token is not None and _shell_wrapper(e) is None:
            notes.append(
                f"{e.name}: starts the engine inside a shell script (command[{e.shell_token}]) "
                "whose engine command is not one line of plain words; kept as a service as "
                "written (its flags are not checked)"
            )
        else:
            usable.append(e)
    if not usable:
        return []
    by_key: dict[tuple[Any, ...], list[EngineService]] = {}
    for e in usable:
        launcher = e.profile.split_command(e.argv).launcher
        wrapper = _shell_wrapper(e) if e.shell_token is not None else None
        shell = (
            (tuple(wrapper["command"]), wrapper["script"], "in_entrypoint" in wrapper)
            if wrapper
            else None
        )
        # Whether the image's ENTRYPOINT runs the launcher (the command holds only flags).
        by_image = bool(e.command_offset) and not e.service.entrypoint
        tail = (tails or {}).get(e.name)
        key = (e.profile.kind, tuple(e.service.entrypoint or ()), launcher, shell, by_image, tail)
        by_key.setdefault(key, []).append(e)
    chosen = max(by_key.values(), key=len)
    for e in usable:
        if e not in chosen:
            notes.append(
                f"{e.name}: another engine, launcher or script than {chosen[0].name}; kept as "
                "a service as written (a tier spec has one engine)"
            )
    for e in chosen:
        if e.shell_token is not None:
            notes.append(
                f"{e.name}: the engine runs inside a shell script: the script is kept, the "
                "engine command in it is rendered from the spec"
            )
    return chosen


def _shell_wrapper(e: EngineService) -> dict[str, Any] | None:
    """The spec's ``engine.shell`` for an engine started inside a shell script: the tokens
    before the script, and the script with ``{argv}`` where the engine command stands. None
    when the command in the script is not written the way the renderer writes it (then the
    service is kept as written)."""
    command = list(e.service.command or ())
    i = e.shell_token
    where: dict[str, Any] = {}
    if i is not None and i < 0 and not command:
        # The script is the entrypoint's (``entrypoint: bash -c "... vllm serve ..."``).
        command = list(e.service.entrypoint or ())
        i += len(command)
        where = {"in_entrypoint": True}
    if i is None or i != len(command) - 1 or ARGV_SLOT in command[i]:
        return None
    script = command[i]
    canonical = shell_join(e.argv)
    at = script.find(canonical)
    spelling: dict[str, str] = {}
    if at < 0:
        # Written with other quoting ("$${MODEL}"): found word by word, its spelling kept.
        span = _script_span(script, e.argv)
        if span is None:
            return None
        at, end, spelling = span
    elif script.find(canonical, at + 1) >= 0:
        return None
    else:
        end = at + len(canonical)
    if end < len(script) and not (script[end].isspace() or script[end] in ";&|<>)"):
        return None  # the match stops inside a word
    out = {"command": command[:i], "script": script[:at] + ARGV_SLOT + script[end:], **where}
    return {**out, "spelling": spelling} if spelling else out


def _script_span(script: str, argv: tuple[str, ...]) -> tuple[int, int, dict[str, str]] | None:
    """(start, end, spelling) of the one run of words in ``script`` that the shell reads as
    ``argv``, with how the script writes each word the renderer would write otherwise;
    None when there is no such run, or more than one."""
    from tierctl.compose.shellwords import ShellWordsError, split_shell_words

    found: list[tuple[int, int, dict[str, str]]] = []
    for segment in _raw_segments(script):
        for k in range(len(segment) - len(argv) + 1):
            run = segment[k : k + len(argv)]
            spelling: dict[str, str] = {}
            for (start, stop), token in zip(run, argv, strict=True):
                raw = script[start:stop]
                try:
                    words, cut = split_shell_words(raw)
                except ShellWordsError:
                    break
                if words != [token] or cut >= 0 or spelling.get(token, raw) != raw:
                    break
                if raw != shell_join([token]) and ("\\" in raw or token != token.strip()):
                    break  # only quoting is kept, never an escaped blank or newline
                if raw != shell_join([token]):
                    spelling[token] = raw
            else:
                found.append((run[0][0], run[-1][1], spelling))
    return found[0] if len(found) == 1 else None


def _raw_segments(script: str) -> list[list[tuple[int, int]]]:
    """The script's words as written ((start, end) of each), in segments a newline or an
    unquoted ``;&|<>`` ends."""
    segments: list[list[tuple[int, int]]] = [[]]
    start: int | None = None
    quote = ""
    i = 0
    while i < len(script):
        ch = script[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == "\\":
            start = i if start is None else start
            i += 1
        elif ch in "'\"":
            start = i if start is None else start
            quote = ch
        elif ch.isspace() or ch in ";&|<>":
            if start is not None:
                segments[-1].append((start, i))
                start = None
            if ch == "\n" or ch in ";&|<>":
                segments.append([])
        elif start is None:
            start = i
        i += 1
    if start is not None and not quote:
        segments[-1].append((start, len(script)))
    return [s for s in segments if s]


def _spec_document(
    merged: ComposeFile,
    group: list[EngineService],
    version: str,
    out: Path,
    tier: str | None,
    host: str,
    notes: list[str],
) -> dict[str, Any]:
    first = group[0]
    replicas = {e.name: _replica_parts(merged, e, notes) for e in group}
    images = [e.service.image or "" for e in group]
    base_image = max(set(images), key=images.count)
    flags = [parts["flags"] for parts in replicas.values()]
    envs = [parts["env"] for parts in replicas.values()]
    fragments = [parts["compose"] for parts in replicas.values()]
    base_flags = _ordered_base(flags)
    base_env = _common(envs)
    base_compose = _common(fragments)
    container = [parts["container_name"] for parts in replicas.values()]
    # All named after their services: the engine's container_name: true (the default); else
    # every replica that has a container name keeps it as its own.
    container_name = all(c == name for c, name in zip(container, replicas, strict=True))
    if not container_name:
        for (name, parts), c in zip(replicas.items(), container, strict=True):
            if c is not None:
                parts["compose_container"] = c
                if c != name:
                    notes.append(
                        f"{name}: container_name {c!r} differs from the service name: kept"
                    )
    launcher = list(first.profile.split_command(first.argv).launcher)
    entry = list(first.service.entrypoint or ())
    wrapper = _shell_wrapper(first) if first.shell_token is not None else None
    if wrapper is not None:
        pass  # the launcher is the script's: the entrypoint and shell tokens stand before it
    elif first.command_offset and not entry:
        launcher = launcher[first.command_offset :]  # the image's ENTRYPOINT runs it
    elif entry:
        launcher = launcher[len(entry) :]
    # The `--name=value` spellings: the engine's are the most common set; a replica that
    # writes others keeps its own (replicas.R.equals_flags).
    sets = [sorted(parts["equals"]) for parts in replicas.values()]
    equals = max(sets, key=sets.count)
    for parts, own in zip(replicas.values(), sets, strict=True):
        if set(own) != set(equals) & set(parts["flags"]):
            parts["own_equals"] = own
    engine: dict[str, Any] = {
        "kind": first.profile.kind,
        "version": version,
        "image": base_image,
        "service": "{replica}",
        "launcher": launcher,
        "args": base_flags,
    }
    if base_env:
        engine["env"] = base_env
    if base_compose:
        engine["compose"] = base_compose
    if entry and not (wrapper or {}).get("in_entrypoint"):
        engine["entrypoint"] = entry
    if wrapper is not None:
        engine["shell"] = wrapper
    if not container_name:
        engine["container_name"] = False
    if equals:
        engine["equals_flags"] = equals
    positional = _positional(first, launcher, entry, wrapper)
    if positional is not None:
        engine["positional"] = positional
    _image_policy(merged, engine, notes)
    replica_docs = _replica_documents(
        replicas, group, base_flags, base_env, base_compose, base_image
    )
    doc_out: dict[str, Any] = {
        "tier": _tier_name(merged, tier, out),
        "host": host,
        "description": f"Imported from {merged.source}",
        "output": f"{out.stem}.compose.yaml",
        "engine": engine,
        "replicas": replica_docs,
        "telemetry": {"variant": "{replica}", "places": []},
    }
    _carry_the_rest(merged, replica_docs, doc_out, notes)
    return doc_out


def _image_policy(merged: ComposeFile, engine: dict[str, Any], notes: list[str]) -> None:
    """``engine.image_policy`` for the file's images: ``tag`` when every image names a
    release tag, ``as-written`` when one does not (``latest``, ``main``, ``${IMG}``) or a
    service builds its own, with one note per image that is not pinned by digest."""
    from tierctl.compose.forms import DIGEST_IMAGE, TAGGED_IMAGE

    images = {name: svc.image for name, svc in merged.services.items() if svc.image}
    loose = {n: i for n, i in images.items() if not DIGEST_IMAGE.match(i)}
    # A service that builds its image runs no release at all: as unpinned as `latest`.
    built = [name for name, svc in merged.services.items() if "build" in svc.data]
    if all(DIGEST_IMAGE.match(i) for i in images.values()) and not built:
        return
    released = all(TAGGED_IMAGE.match(i) and "$" not in i for i in loose.values())
    engine["image_policy"] = "tag" if released and not built else "as-written"
    notes += [f"{name}: builds its image (build:): kept as written" for name in built]
    for name, image in loose.items():
        if any(n.startswith(f"{name}: image ") for n in notes):
            continue  # said already (the engine's release)
        kind = "a tag" if TAGGED_IMAGE.match(image) and "$" not in image else "no release"
        notes.append(f"{name}: image {image} names {kind}, not a digest: kept as written")


def _replica_documents(
    replicas: dict[str, dict[str, Any]],
    group: list[EngineService],
    base_flags: dict[str, Any],
    base_env: dict[str, Any],
    base_compose: dict[str, Any],
    base_image: str,
) -> dict[str, Any]:
    """Each replica's spec entry: its GPUs and what it overrides of the engine's."""
    replica_docs: dict[str, Any] = {}
    for (name, parts), e in zip(replicas.items(), group, strict=True):
        doc: dict[str, Any] = dict(parts["gpus"])
        over = _overrides(base_flags, parts["flags"])
        if over:
            doc["args"] = over
        env_over = _overrides(base_env, parts["env"])
        if env_over:
            doc["env"] = env_over
        if (e.service.image or "") != base_image:
            doc["image"] = e.service.image
        if "compose_container" in parts:
            doc["container_name"] = parts["compose_container"]
        if "own_equals" in parts:
            doc["equals_flags"] = parts["own_equals"]
        own = {k: v for k, v in parts["compose"].items() if base_compose.get(k) != v}
        if own:
            doc["compose"] = own
        replica = _replica_name(name)
        if replica != name:
            doc["service"] = name  # compose allows the name, a replica's is lower-case
        if replica in replica_docs:
            raise InputError(
                f"services {name} and {replica_docs[replica].get('service', replica)} would "
                f"both be replica {replica}",
                location=Location(file="(import)"),
                rule="replica names: lower-case letters, digits, '-' and '_'",
                fix="rename one of the services",
            )
        replica_docs[replica] = doc
    return replica_docs


def _carry_the_rest(
    merged: ComposeFile, replica_docs: dict[str, Any], doc_out: dict[str, Any], notes: list[str]
) -> None:
    """The other services (with a role guessed from their image) and the top-level keys a
    spec carries, into ``doc_out``; a note names the top-level keys it does not carry."""
    services: dict[str, Any] = {}
    for name, svc in merged.services.items():
        if name in replica_docs or any(d.get("service") == name for d in replica_docs.values()):
            continue
        image = str(svc.image or "")
        role = next((r for key, r in _ROLES if key in image), "other")
        services[name] = {"role": role, "compose": dict(svc.data)}
    if services:
        doc_out["services"] = services
    for key in ("volumes", "networks", "secrets", "configs"):
        value = merged.data.get(key)
        if value:
            doc_out[key] = value
    extensions = {
        k: v for k, v in merged.data.items() if str(k).startswith("x-") and k != "x-tierctl"
    }
    if extensions:
        doc_out["extensions"] = extensions
    dropped = [
        k
        for k in merged.data
        if k not in ("services", "name", "volumes", "networks", "secrets", "configs")
        and not str(k).startswith("x-")
    ]
    if dropped:
        notes.append(f"top-level keys not carried into the spec: {', '.join(map(str, dropped))}")


def _tier_name(merged: ComposeFile, tier: str | None, out: Path) -> str:
    if tier:
        return tier
    name = merged.data.get("name")
    if isinstance(name, str) and name:
        return _TIER.sub("-", name.lower()).strip("-") or "tier"
    folder = Path(merged.source.split(" + ")[0]).resolve().parent.name
    return _TIER.sub("", folder.lower()) or "tier"


def _replica_name(service: str) -> str:
    """The replica a service becomes: its name in lower case, ``.`` as ``-``."""
    return service.lower().replace(".", "-")


def _replica_parts(merged: ComposeFile, e: EngineService, notes: list[str]) -> dict[str, Any]:
    """One engine service as spec parts: flags, env, gpus, compose fragment."""
    if not _REPLICA.match(_replica_name(e.name)):
        raise InputError(
            f"service name {e.name!r} cannot name a replica",
            location=merged.location("services", e.name),
            rule="replica names: lower-case letters, digits, '-' and '_'",
            fix="rename the service",
        )
    cmd = e.profile.split_command(e.argv)
    flags: dict[str, Any] = dict(cmd.positional)
    equals: set[str] = set()
    seen: dict[str, list[tuple[str, ...]]] = {}
    for use in parse_flags(e.argv, cmd.flags_start, e.catalog):
        if not use.token:
            raise InputError(
                f"stray value {shown_value(use.values[0])} before any flag in {e.name}'s command",
                location=merged.location("services", e.name, "command"),
                rule="an engine command is a launcher, then flags",
                fix="put the value after its flag",
            )
        if use.token.startswith("--") is False:
            raise InputError(
                f"{e.name}: short option {use.token!r}: a spec writes long flags",
                location=merged.location("services", e.name, "command"),
                rule="spec flags are long options",
                fix=f"write the long spelling of {use.token}",
            )
        seen.setdefault(use.name, []).append(use.values)
        if use.inline:
            equals.add(use.name)
    for name, occurrences in seen.items():
        if len(occurrences) > 1:
            if not all(len(v) == 1 for v in occurrences):
                raise InputError(
                    f"{e.name}: --{name} is repeated with several values each",
                    location=merged.location("services", e.name, "command"),
                    rule="a repeated flag takes one value each time",
                    fix=f"give --{name} one value per occurrence",
                )
            flags[name] = {"repeat": [v[0] for v in occurrences]}
        elif not occurrences[0]:
            flags[name] = True
        elif len(occurrences[0]) == 1:
            flags[name] = occurrences[0][0]
        else:
            flags[name] = list(occurrences[0])
    env: dict[str, Any] = {}
    for key, value in e.service.environment.items():
        # A bare key is passed through from the host: kept so, as {from_host: true}.
        env[key] = {"from_host": True} if value is None else value
    compose = {k: v for k, v in e.service.data.items() if k not in _DERIVED}
    gpus = _gpus(e, compose, env, notes)
    return {
        "flags": flags,
        "equals": equals,
        "env": env,
        "gpus": gpus,
        "compose": compose,
        "container_name": e.service.container_name,
    }


def _gpus(
    e: EngineService, compose: dict[str, Any], env: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """The replica's GPUs (``gpus``/``gpu_count``) and how the file grants them
    (``gpu_style``); the keys a style renders are taken out of ``compose`` and ``env``, any
    other grant stays there as written (``gpu_style: as-written``)."""
    deploy = compose.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    devices = reservations.get("devices") if isinstance(reservations, dict) else None
    if devices is not None:
        canonical = _canonical_devices(devices)
        if canonical is not None:
            _drop_devices(compose)
            return _fit_note(e, canonical, notes)
        return _fit_note(e, {"gpu_style": "as-written", **_device_count(devices)}, notes)
    if compose.get("gpus") == "all":
        del compose["gpus"]
        return _fit_note(e, {"gpu_style": "gpus", "gpu_count": "all"}, notes)
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    if compose.get("runtime") == "nvidia" and isinstance(visible, str):
        ids = [v.strip() for v in visible.split(",")]
        if visible == "all" or all(_GPU_INDEX.match(i) for i in ids):
            del compose["runtime"], env["NVIDIA_VISIBLE_DEVICES"]
            got: dict[str, Any] = (
                {"gpu_count": "all"} if visible == "all" else {"gpus": [int(i) for i in ids]}
            )
            return _fit_note(e, {"gpu_style": "runtime", **got}, notes)
    if compose.get("devices") == list(AMD_DEVICES):
        del compose["devices"]
        for style, key in AMD_VISIBLE.items():
            chosen = env.get(key)
            ids = [v.strip() for v in chosen.split(",")] if isinstance(chosen, str) else []
            if ids and all(_GPU_INDEX.match(i) for i in ids) and len(set(ids)) == len(ids):
                # ROCm replicas pick their GPUs with HIP_/ROCR_VISIBLE_DEVICES.
                del env[key]
                return _fit_note(e, {"gpu_style": style, "gpus": [int(i) for i in ids]}, notes)
        return _fit_note(e, {"gpu_style": "amd", "gpu_count": "all"}, notes)
    if any(k in compose for k in ("gpus", "runtime", "devices")):
        return _fit_note(e, {"gpu_style": "as-written"}, notes)
    notes.append(
        f"{e.name}: reserves no GPU (a CPU replica, or the host's default runtime gives them): "
        "GPU fit not checked"
    )
    return {"gpu_count": 0}


def _canonical_devices(devices: Any) -> dict[str, Any] | None:
    """gpus/gpu_count of a reservation in the form the renderer writes, else None."""
    if not isinstance(devices, list) or len(devices) != 1 or not isinstance(devices[0], dict):
        return None
    device = devices[0]
    if set(device) - {"driver", "device_ids", "count", "capabilities"}:
        return None
    if device.get("driver") != "nvidia" or device.get("capabilities") != ["gpu"]:
        return None
    ids = device.get("device_ids")
    count = device.get("count")
    if "device_ids" in device and "count" not in device:
        # Written as strings, as the renderer writes them.
        if (
            isinstance(ids, list)
            and ids
            and all(isinstance(i, str) and _GPU_INDEX.match(i) for i in ids)
        ):
            return {"gpus": [int(i) for i in ids]}
        return None
    if "count" in device and "device_ids" not in device:
        if count == "all":
            return {"gpu_count": "all"}
        if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            return {"gpu_count": count}
    return None


def _device_count(devices: Any) -> dict[str, Any]:
    """What tierctl can read of a reservation it keeps as written: ids, a count, or nothing."""
    ids: list[int] = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict):
            return {}
        got = device.get("device_ids")
        count = device.get("count")
        if isinstance(got, list) and all(_GPU_INDEX.match(str(i)) for i in got):
            ids += [int(i) for i in got]
        elif count in ("all", -1):
            return {"gpu_count": "all"}
        elif isinstance(count, int) and not isinstance(count, bool) and len(devices) == 1:
            return {"gpu_count": count} if count >= 0 else {}
        else:
            return {}
    return {"gpus": ids} if ids and len(set(ids)) == len(ids) else {}


def _fit_note(e: EngineService, got: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """One note for a grant kept in another style, and one where the GPU count is unknown."""
    style = got.get("gpu_style", "deploy")
    if style == "as-written":
        notes.append(f"{e.name}: GPUs granted by keys tierctl does not render: kept as written")
    elif style != "deploy":
        notes.append(f"{e.name}: GPUs granted in the {style} style: kept (gpu_style: {style})")
    if got.get("gpu_count") == "all" or not (got.get("gpus") or got.get("gpu_count")):
        notes.append(
            f"{e.name}: GPU fit not checked (the file gives {'every GPU' if got.get('gpu_count') == 'all' else 'no count'}; the host's GPUs are not in it)"
        )
    return got


def _drop_devices(compose: dict[str, Any]) -> None:
    """The fragment without the device reservation the renderer writes."""
    rest = dict(compose["deploy"])
    resources = dict(rest.get("resources") or {})
    reservations = {
        k: v for k, v in (resources.get("reservations") or {}).items() if k != "devices"
    }
    if reservations:
        resources["reservations"] = reservations
    else:
        resources.pop("reservations", None)
    if resources:
        rest["resources"] = resources
    else:
        rest.pop("resources", None)
    if rest:
        compose["deploy"] = rest
    else:
        compose.pop("deploy", None)


def _positional(
    first: EngineService, launcher: list[str], entry: list[str], wrapper: dict[str, Any] | None
) -> bool | None:
    """``engine.positional`` where the file writes the positional argument (vLLM's model)
    otherwise than the rendering would by default; None where the default is the file's."""
    profile = first.profile
    if not profile.positional:
        return None
    before: tuple[str, ...] = ()
    if wrapper is None and entry:
        before = tuple(entry)
    elif wrapper is None and not launcher:
        before = profile.image_entrypoint(first.service.image)
    default = profile.takes_positional([*before, *launcher])
    written = bool(profile.split_command(first.argv).positional)
    return None if written == default else written


def _ordered_base(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """The engine's base flags: every replica's flags in one order that agrees with each
    replica's own (so a replica's argv renders token for token as its file wrote it: a
    changed flag keeps its place, an absent one is a null override), each with the value
    most replicas give it. Where the replicas order their flags differently, only the flags
    every replica gives alike, and only where that keeps every order."""
    order = _merged_order([list(m) for m in maps])
    if order is None:
        alike = _common(maps)
        ok = all(
            [k for k in m if k in alike] == list(alike)
            and all(k in alike for k in list(m)[: len(alike)])
            for m in maps
        )
        return alike if ok else {}
    # Flags every replica gives are the engine's; a flag only some give is a replica's own
    # (appended after the base) unless a base flag follows it somewhere.
    shared = {k for k in order if all(k in m for m in maps)}
    grown = True
    while grown:
        grown = False
        for m in maps:
            keys = list(m)
            last = max((i for i, k in enumerate(keys) if k in shared), default=-1)
            early = {k for k in keys[:last] if k not in shared}
            if early:
                shared |= early
                grown = True
    base: dict[str, Any] = {}
    for key in (k for k in order if k in shared):
        values = [m[key] for m in maps if key in m]
        base[key] = max(values, key=lambda v: sum(1 for w in values if w == v))
    return base


def _merged_order(orders: list[list[str]]) -> list[str] | None:
    """One sequence of all the keys that keeps every list's order (the first list's where
    free), or None when two lists order two keys differently."""
    keys: list[str] = []
    before: dict[str, set[str]] = {}
    for order in orders:
        for i, key in enumerate(order):
            if key not in before:
                keys.append(key)
                before[key] = set()
            before[key].update(order[:i])
    out: list[str] = []
    placed: set[str] = set()
    while len(out) < len(keys):
        ready = next((k for k in keys if k not in placed and before[k] <= placed), None)
        if ready is None:
            return None
        out.append(ready)
        placed.add(ready)
    return out


def common_keys(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Keys with the same value in every map, in the first map's order."""
    first, rest = maps[0], maps[1:]
    return {k: v for k, v in first.items() if all(k in m and m[k] == v for m in rest)}


_common = common_keys  # the name this module's own callers use


def overrides_over(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """What a replica changes over the base: new or different keys, null for a removed one."""
    out: dict[str, Any] = {k: v for k, v in own.items() if base.get(k, _ABSENT) != v}
    out.update({k: None for k in base if k not in own})
    return out


_overrides = overrides_over  # the name this module's own callers use


_ABSENT = object()


# --- what the import rewrites before reading the file ---------------------------------------

_VAR = re.compile(r"[^A-Z0-9_]+")
_DEFAULTED = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):?[-+?][^}]*\}$")


def _var_name(key: str, value: str) -> str:
    """The variable a credential is read from: a ``${X:-default}``'s X, else the key's."""
    m = _DEFAULTED.match(value)
    if m:
        return m.group(1)
    name = _VAR.sub("_", key.upper()).strip("_") or "SECRET"
    return name if not name[0].isdigit() else f"V_{name}"


def _prepared(
    merged: ComposeFile,
    project_dir: Path,
    out_dir: Path,
    references: list[SecretReference],
    rebased: list[tuple[str, str, str]],
) -> ComposeFile:
    """The file as the spec will say it: literal credentials in environments and commands
    turned into ``${VAR:?...}`` references (``references``), relative host paths rebased
    from ``project_dir`` onto ``out_dir`` (``rebased``)."""
    data = dict(merged.data)
    services: dict[str, Any] = {}
    for name, body in (data.get("services") or {}).items():
        body = dict(body)
        env = body.get("environment")
        if env is not None:
            body["environment"] = _env_references(str(name), env, references)
        command = body.get("command")
        if isinstance(command, list):
            body["command"] = _command_references(str(name), command, references)
        if out_dir != project_dir:
            body = _rebase_service(str(name), body, project_dir, out_dir, rebased)
        services[name] = body
    data["services"] = services
    if out_dir != project_dir:
        for key in ("secrets", "configs"):
            top = data.get(key)
            if isinstance(top, dict):
                data[key] = {
                    k: _rebase_file(f"{key}.{k}", v, project_dir, out_dir, rebased)
                    for k, v in top.items()
                }
    if not references and not rebased:
        return merged
    return ComposeFile.from_data(merged.source, data, merged.texts, as_written=merged.as_written)


def _reference(var: str) -> str:
    return f"${{{var}:?set {var}}}"


def _env_references(service: str, env: Any, references: list[SecretReference]) -> Any:
    """``environment`` (mapping or list form, kept) with literal credentials as references."""

    def convert(key: str, value: Any) -> Any:
        if not isinstance(value, str) or not literal_secret(key, value):
            return value
        var = _var_name(key, value)
        references.append(SecretReference(service, f"environment {key}", var))
        return _reference(var)

    if isinstance(env, dict):
        return {k: convert(str(k), v) for k, v in env.items()}
    if isinstance(env, list):
        out: list[Any] = []
        for item in env:
            key, eq, value = str(item).partition("=")
            out.append(f"{key}={convert(key, value)}" if eq else item)
        return out
    return env


def _command_references(
    service: str, command: list[Any], references: list[SecretReference]
) -> list[Any]:
    """A list ``command`` with each literal credential token (``--api-key sk-...``) a
    reference named after its flag (``API_KEY``)."""
    out = list(command)
    tokens = [str(t) for t in command]
    for i, _ in secret_positions(tokens):
        before = tokens[i - 1] if i > 0 and tokens[i - 1].startswith("--") else ""
        if "=" in tokens[i] and tokens[i].startswith("--"):
            flag, _, _ = tokens[i].partition("=")
            var = _var_name(flag.lstrip("-"), "")
            out[i] = f"{flag}={_reference(var)}"
        else:
            var = _var_name(before.lstrip("-") or f"secret-{i}", "")
            out[i] = _reference(var)
        references.append(SecretReference(service, f"command token {i}", var))
    return out


_DEFAULT_PATH = re.compile(r"^(\$\{[A-Za-z_][A-Za-z0-9_]*:?-)(\.[^}]*)(\}:.*)$")


def _moved(source: str, project_dir: Path, out_dir: Path) -> str:
    new = os.path.relpath(os.path.normpath(project_dir / source), out_dir)
    return new if new.startswith(".") else f"./{new}"


def _rebase_service(
    name: str,
    body: dict[str, Any],
    project_dir: Path,
    out_dir: Path,
    rebased: list[tuple[str, str, str]],
) -> dict[str, Any]:
    """One service with its relative bind mounts, env files and build context rebased
    (compose's own reading of which paths are relative: ``compose.long_forms``)."""

    def move(source: str) -> str:
        if "$" in source:
            return source  # a variable's value is not in the file
        new = _moved(source, project_dir, out_dir)
        rebased.append((name, source, new))
        return new

    volumes = body.get("volumes")
    if isinstance(volumes, list):
        out: list[Any] = []
        for entry in volumes:
            default = _DEFAULT_PATH.match(entry) if isinstance(entry, str) else None
            if default is None:
                out.append(entry)
                continue
            # ${DATA:-./data}:/data: the default is rebased (a relative DATA set where
            # compose runs is then read from the spec's folder, as any relative path).
            head, path, tail = default.groups()
            out.append(f"{head}{move(path)}{tail}")
        body = {**body, "volumes": out}
    return rebase_service(body, str(project_dir), move)


def _rebase_file(
    who: str, value: Any, project_dir: Path, out_dir: Path, rebased: list[tuple[str, str, str]]
) -> Any:
    """A top-level secret or config whose ``file:`` is relative, rebased."""
    if not isinstance(value, dict) or not isinstance(value.get("file"), str):
        return value
    path = value["file"]
    if os.path.isabs(path) or path.startswith("~"):
        return value
    new = _moved(path, project_dir, out_dir)
    rebased.append((who, path, new))
    return {**value, "file": new}


# --- what a rendering adds to an imported file --------------------------------------------

#: Everything the rendering of an imported spec adds to the file it came from, and nothing
#: else (``docker compose config`` of both is equal once these are taken out; the adopt
#: corpus checks it with the real Compose): (where, what).
RENDER_ADDITIONS: tuple[tuple[str, str], ...] = (
    ("x-tierctl", "the tier, host, spec path and spec digest (top-level extension)"),
    ("services.<replica>.labels", "tierctl.tier, tierctl.replica, tierctl.role"),
    (
        "services.<replica>.logging",
        "{driver: json-file} where the file set no logging (Docker's default driver)",
    ),
)


def without_render_additions(
    rendered: dict[str, Any], original: dict[str, Any], replicas: Sequence[str]
) -> dict[str, Any]:
    """A ``docker compose config`` JSON of a rendering without :data:`RENDER_ADDITIONS`
    (``original``: the imported file's, to tell an added logging block from a kept one)."""
    out = {k: v for k, v in rendered.items() if k != "x-tierctl"}
    services = dict(out.get("services") or {})
    before = original.get("services") or {}
    for name in replicas:
        if name not in services:
            continue
        service = dict(services[name])
        labels = {
            k: v for k, v in (service.get("labels") or {}).items() if not k.startswith("tierctl.")
        }
        if labels or "labels" in before.get(name, {}):
            service["labels"] = labels
        else:
            service.pop("labels", None)
        if "logging" not in before.get(name, {}) and service.get("logging") == {
            "driver": "json-file"
        }:
            service.pop("logging")
        services[name] = service
    out["services"] = services
    return out
