"""Reading a compose file the way ``docker compose config`` sees it.

YAML anchors and merge keys are resolved, a key given twice in one mapping is refused (as
go-yaml refuses it), ``!reset``/``!override`` are understood (:mod:`tierctl.compose.tags`),
``$`` interpolation is applied in the caller's mode (:mod:`tierctl.compose.interpolation`),
``include`` pulls in the files it names and ``extends`` merges a service over its base, both with
compose's merge rules (:mod:`tierctl.compose.merge`); then every service is normalised
(:class:`~tierctl.compose.compose_file.ComposeService`). Errors name the file and line.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tierctl.compose.compose_file import ComposeFile
from tierctl.compose.interpolation import (
    Interpolation,
    InterpolationError,
    MissingVariable,
    interpolate,
)
from tierctl.compose.lines import locate, merged_lines
from tierctl.compose.long_forms import included_ports, rebase_service
from tierctl.compose.merge import (
    UnicityError,
    enforce_file_unicity,
    merge_data,
    merge_service,
    strip_tags,
)
from tierctl.compose.tags import FastComposeYamlLoader, Override, Reset
from tierctl.errors import ComposeInputError, Location
from tierctl.readers import PathKey, load_yaml, read_text

# Resources an included file contributes (compose-go loader/include.go importResources).
_IMPORTED = ("services", "volumes", "networks", "secrets", "configs", "models")


def load_compose(
    path_or_text: str | Path,
    *,
    source: str | None = None,
    env: Mapping[str, str] | None = None,
    interpolation: Interpolation | None = None,
    base_dir: str | Path | None = None,
    rebase: bool = False,
    overlay: bool = False,
) -> ComposeFile:
    """Read one compose file (a path, or YAML text with ``source`` naming it).

    Args:
        path_or_text: a file path (a ``Path``, or a ``str`` without a newline), or the YAML
            text itself (a ``str`` with at least one newline).
        source: the name used in messages (default: the path; ``<compose>`` for text).
        env: variables to substitute.
        interpolation: KEEP, DEFAULTS or STRICT; default KEEP without ``env`` (every
            ``${...}`` kept as written), STRICT with it.
        base_dir: the folder ``include`` and ``extends: {file: ...}`` paths are relative to
            (default: the file's folder; text without it cannot include other files).
        rebase: make the relative paths of included and extended services absolute from
            their own file's folder, as Compose does (``compose config``); by default they
            are kept as written.
        overlay: the file is an override (a later ``-f``): a service written as ``null``
            adds nothing to the earlier files' service of that name, as Compose merges it
            (it is refused once the files are merged if no earlier file defines it).

    Raises:
        ComposeInputError: unreadable file, malformed YAML, not a mapping, bad interpolation,
            or a service compose cannot read; located at file:line.
    """
    if isinstance(path_or_text, Path) or "\n" not in path_or_text:
        path = Path(path_or_text)
        name = source or str(path)
        text = read_text(path, what="compose", error=ComposeInputError)
        folder: str | Path | None = base_dir if base_dir is not None else path.parent
    else:
        text = str(path_or_text)
        name = source or "<compose>"
        folder = base_dir
    return parse_compose(
        text,
        source=name,
        env=env,
        interpolation=interpolation,
        base_dir=folder,
        rebase=rebase,
        overlay=overlay,
    )


def parse_compose(
    text: str,
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    interpolation: Interpolation | None = None,
    base_dir: str | Path | None = None,
    rebase: bool = False,
    overlay: bool = False,
) -> ComposeFile:
    """Read compose YAML text; arguments and errors as :func:`load_compose`."""
    reading = _Reading(env, interpolation, (), rebase, overlay)
    folder = Path(base_dir) if base_dir is not None else None
    # The cyclic GC is paused while the file is read, as load_yaml pauses it: everything
    # built here is kept (nothing is garbage), and each collection would walk every earlier
    # file's values again (a 100-host fleet read in one process).
    collecting = gc.isenabled()
    gc.disable()
    texts: tuple[tuple[str, str], ...] = ((source, text),)
    try:
        tagged, texts = _read(text, source, folder, reading)
        # Compose makes keyed lists unique in every file, not only when merging several.
        data = enforce_file_unicity(strip_tags(tagged))
        as_written = interpolation is Interpolation.AS_WRITTEN
        return ComposeFile.from_data(
            source, data, texts, raw=tagged, overlay=overlay, as_written=as_written
        )
    except UnicityError as exc:
        raise ComposeInputError(
            str(exc),
            location=locate(merged_lines(texts), exc.path, source),
            rule=exc.rule,
            fix=exc.fix,
        ) from None
    finally:
        if collecting:
            gc.enable()


@dataclass(frozen=True)
class _Reading:
    """What every file of one read shares: the variables, the mode, the include chain."""

    env: Mapping[str, str] | None
    mode: Interpolation | None
    chain: tuple[str, ...]  # files being included, outermost first (cycle detection)
    rebase: bool = False  # included/extended services' relative paths made absolute
    overlay: bool = False  # a later -f file: one without a document adds nothing


def _read(
    text: str, source: str, folder: Path | None, reading: _Reading
) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """One file: parsed, interpolated, its includes imported and its extends applied."""
    data = _parse(text, source, included=bool(reading.chain), overlay=reading.overlay)
    data = _interpolate_tree(data, (), _Where(source, text, reading.env, reading.mode))
    texts: tuple[tuple[str, str], ...] = ((source, text),)
    if "include" in data:
        data, included = _apply_include(data, source, text, folder, reading)
        texts = included + texts
    services = data.get("services")
    if isinstance(services, dict) and any(
        isinstance(s, dict) and "extends" in s for s in services.values()
    ):
        data = {**data, "services": _apply_extends(services, source, text, folder, reading)}
    return data, texts


def _error(source: str, text: str, path: PathKey, message: str, **kw: Any) -> ComposeInputError:
    return ComposeInputError(
        message, location=locate(merged_lines(((source, text),)), path, source), **kw
    )


def _project_directory(
    folder: Path, spec: dict[str, Any], source: str, text: str, at: tuple[Any, ...]
) -> Path | None:
    """An include's ``project_directory`` under ``folder`` (None: not given)."""
    if not spec.get("project_directory"):
        return None
    named = _named_path(folder, spec["project_directory"], source, text, (*at, "project_directory"))
    # Absolute, as Compose holds it: the included services' paths are resolved from it, and
    # a relative result (the file named by a relative path) would read as a volume name.
    return named.resolve()


def _named_path(folder: Path, name: object, source: str, text: str, at: tuple[Any, ...]) -> Path:
    """``name`` (an include's or extends' file, a project directory) under ``folder``; a NUL
    byte is refused here (``Path.resolve`` raised ValueError on it)."""
    if "\x00" in str(name):
        raise _error(
            source,
            text,
            at,
            "the path holds a NUL byte",
            rule="a file name has no NUL byte",
            fix="remove the NUL from the path",
        )
    return folder / str(name)


def _read_file(path: Path, reading: _Reading, source: str, text: str, at: PathKey) -> str:
    try:
        return read_text(path, what="included compose", error=ComposeInputError)
    except ComposeInputError as exc:
        raise _error(
            source,
            text,
            at,
            f"cannot read {path}: {exc.message}",
            rule="include/extends name files relative to the compose file's folder",
            fix="fix the path or create the file",
        ) from None


def _apply_include(
    data: dict[str, Any], source: str, text: str, folder: Path | None, reading: _Reading
) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """compose's ``include``: each entry's files are read as their own project (merged in
    order when several) and their services, volumes, networks, secrets and configs are
    imported; a resource the including file also defines must be the same, or compose
    refuses the project."""
    entries = data["include"]
    if not isinstance(entries, list):
        raise _error(
            source,
            text,
            ("include",),
            "include must be a list",
            rule="compose include syntax",
            fix="write include: [path, ...]",
        )
    out = {k: v for k, v in data.items() if k != "include"}
    texts: tuple[tuple[str, str], ...] = ()
    for i, entry in enumerate(entries):
        at: PathKey = ("include", i)
        spec = {"path": entry} if isinstance(entry, str) else entry
        if not isinstance(spec, dict) or "path" not in spec:
            raise _error(
                source,
                text,
                at,
                "an include entry is a path or a mapping with path:",
                rule="compose include syntax",
                fix="write - path: other.yaml",
            )
        if (
            spec.get("env_file") is not None
            and reading.mode not in (Interpolation.KEEP, Interpolation.AS_WRITTEN)
            and (reading.mode is not None or reading.env is not None)
        ):
            raise _error(
                source,
                text,
                (*at, "env_file"),
                "tierctl does not read an include's env_file when substituting variables",
                rule="deliberate difference (docs/compose.md)",
                fix="pass the variables in the environment, or validate (which keeps "
                "references as written)",
            )
        if folder is None:
            raise _error(
                source,
                text,
                at,
                "include names files relative to the compose file's folder, and this text has none",
                rule="include needs the file's location",
                fix="read the file by its path",
            )
        paths = spec["path"] if isinstance(spec["path"], list) else [spec["path"]]
        project = _project_directory(folder, spec, source, text, at)
        merged: dict[str, Any] = {}
        raw: dict[str, Any] = {}  # as the included files wrote them (compared, not kept)
        for p in paths:
            target = _named_path(folder, p, source, text, (*at, "path")).resolve()
            key = str(target)
            if key in reading.chain or key == str(Path(source).resolve()):
                raise _error(
                    source,
                    text,
                    at,
                    f"include cycle: {' -> '.join((*reading.chain, key))}",
                    rule="include cycle",
                    fix="remove the include that loops back",
                )
            child_text = _read_file(target, reading, source, text, at)
            child = _Reading(
                reading.env,
                reading.mode,
                (*reading.chain, str(Path(source).resolve())),
                reading.rebase,
            )
            child_data, child_texts = _read(
                child_text, str(target), project or target.parent, child
            )
            raw = merge_data(raw, child_data)
            if reading.rebase:
                # As Compose hands an included project over: paths resolved, ports long with
                # their defaults (loadYamlModel's SetDefaultValues).
                child_data = included_ports(_rebased(child_data, str(project or target.parent)))
            merged = merge_data(merged, child_data)
            texts = texts + child_texts
        _import_resources(out, merged, raw, source, text)
    return out, texts


def _import_resources(
    out: dict[str, Any], merged: dict[str, Any], raw: dict[str, Any], source: str, text: str
) -> None:
    """An include's resources into ``out`` (the including file's); one defined in both must
    be the same as the included file wrote it (``raw``), or compose refuses the project."""
    for kind in _IMPORTED:
        imported = merged.get(kind)
        if not isinstance(imported, dict):
            continue
        local = out.get(kind) if isinstance(out.get(kind), dict) else {}
        written = raw.get(kind) if isinstance(raw.get(kind), dict) else {}
        combined = dict(imported)
        for name, value in (local or {}).items():
            if name in combined and value != (written or {}).get(name, combined[name]):
                # Compose 2.40 refuses a resource defined both here and in an included
                # file unless the two are the same (compose-go's importResources).
                raise _error(
                    source,
                    text,
                    (kind, str(name)),
                    f"{kind}.{name} conflicts with imported resource",
                    rule="a resource an included file defines is not redefined (docker "
                    "compose refuses it)",
                    value=str(name),
                    fix=f"drop {kind}.{name} here and change it in the included file, or "
                    "use an override file (-f) to change it",
                )
            combined[name] = value
        out[kind] = combined


def _rebased(data: dict[str, Any], folder: str) -> dict[str, Any]:
    services = data.get("services")
    if not isinstance(services, dict):
        return data
    rebased = {
        n: rebase_service(s, folder) if isinstance(s, dict) else s for n, s in services.items()
    }
    return {**data, "services": rebased}


def _apply_extends(
    services: dict[str, Any], source: str, text: str, folder: Path | None, reading: _Reading
) -> dict[str, Any]:
    """compose's ``extends``: each service merged over its (recursively extended) base."""
    where = _File(source, text, folder)
    return {
        name: _extended(name, services, where, reading, ()) if isinstance(svc, dict) else svc
        for name, svc in services.items()
    }


@dataclass(frozen=True)
class _File:
    source: str
    text: str
    folder: Path | None


def _extended(
    name: str,
    services: dict[str, Any],
    where: _File,
    reading: _Reading,
    seen: tuple[tuple[str, str], ...],
) -> dict[str, Any]:
    service = services[name]
    if not isinstance(service, dict) or "extends" not in service:
        return dict(service) if isinstance(service, dict) else service
    at: PathKey = ("services", name, "extends")
    ext = service["extends"]
    if isinstance(ext, str):
        ref, file = ext, None
    elif isinstance(ext, dict) and isinstance(ext.get("service"), str):
        ref, file = ext["service"], ext.get("file")
    else:
        raise _error(
            where.source,
            where.text,
            at,
            "extends needs a service name",
            rule="compose extends syntax",
            fix="write extends: {service: base, file: other.yaml}",
        )
    if (where.source, name) in seen:
        chain = " -> ".join(f"{s}:{n}" for s, n in (*seen, (where.source, name)))
        raise _error(
            where.source,
            where.text,
            at,
            f"extends cycle: {chain}",
            rule="extends cycle",
            fix="break the loop of extends",
        )
    if file is not None:
        if where.folder is None:
            raise _error(
                where.source,
                where.text,
                at,
                "extends names a file relative to the compose file's folder, and this text has none",
                rule="extends needs the file's location",
                fix="read the file by its path",
            )
        target = _named_path(where.folder, file, where.source, where.text, at).resolve()
        other_text = _read_file(target, reading, where.source, where.text, at)
        other = _parse(other_text, str(target))
        other = _interpolate_tree(
            other, (), _Where(str(target), other_text, reading.env, reading.mode)
        )
        other_services = other.get("services")
        if not isinstance(other_services, dict) or ref not in other_services:
            raise _error(
                where.source,
                where.text,
                at,
                f"cannot extend service {name}: service {ref!r} not found in {file}",
                rule="extends names an existing service",
                value=ref,
                fix=f"define {ref} in {file} or fix the name",
            )
        base_where = _File(str(target), other_text, target.parent)
        base = _extended(ref, other_services, base_where, reading, (*seen, (where.source, name)))
        if reading.rebase and isinstance(base, dict):
            base = rebase_service(base, str(target.parent), default_context=False)
    else:
        if ref not in services:
            raise _error(
                where.source,
                where.text,
                at,
                f"cannot extend service {name}: service {ref!r} not found",
                rule="extends names an existing service",
                value=ref,
                fix=f"define {ref} in this file or name its file: extends: {{service: {ref}, file: ...}}",
            )
        base = _extended(ref, services, where, reading, (*seen, (where.source, name)))
    own = {k: v for k, v in service.items() if k != "extends"}
    if file is not None and reading.rebase and where.folder is not None and "env_file" in own:
        # The base's env files are absolute now (rebased from its file); the service's own are
        # made absolute too, so that one file named both ways is one entry once merged (as
        # Compose, which resolves every path before merging, keeps it).
        own["env_file"] = rebase_service({"env_file": own["env_file"]}, str(where.folder))[
            "env_file"
        ]
    try:
        return merge_service(strip_tags(base) if isinstance(base, dict) else {}, own)
    except UnicityError as exc:
        # A long mount without a target, in the service or the one it extends: at this
        # service (the unicity walk saw only the pattern `services.*`).
        raise _error(
            where.source,
            where.text,
            at,
            str(exc).replace("services.*.", f"services.{name}."),
            rule=exc.rule,
            fix=exc.fix.replace("services.*.", f"services.{name}."),
        ) from None


def _parse(text: str, source: str, included: bool = False, overlay: bool = False) -> dict[str, Any]:
    """One file's mapping; an empty file that another includes, or a later ``-f`` file,
    reads as no resources (as Compose reads it; an empty project Compose refuses)."""
    data = load_yaml(
        text,
        source,
        error=ComposeInputError,
        loader=FastComposeYamlLoader,
        # Refused in the reader's one bounded walk over the nodes, in compose's own wording.
        duplicates=lambda key, node, first: _duplicate(source, key, node, first),
        recursion=lambda node: _recursive(source, node),
        line_depth=0,  # ComposeFile.lines maps lines only when a message needs them
    ).data
    if data is None and (included or overlay) and not has_document(text):
        return {}  # no document at all (an empty file, only comments); `---` is a null one
    if not isinstance(data, dict):
        raise ComposeInputError(
            "a compose file must be a mapping with a services: key",
            location=Location(file=source, line=1),
            value=type(data).__name__,
        )
    services = data.get("services")
    if services is not None and not isinstance(services, dict):
        raise ComposeInputError(
            "must be a mapping of service name to service",
            location=Location(file=source, path="services"),
            value=type(services).__name__,
        )
    if included:
        _check_included_top_level(data, source, text)
    return data


def has_document(text: str) -> bool:
    """Whether YAML text holds a document (``---`` or ``null`` do: a null one), not only
    comments and blank lines."""
    try:
        return any(True for _ in yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return True


#: The top-level keys of the compose-spec schema (``x-*`` besides); those of them whose
#: value is a mapping of names.
_TOP_LEVEL = ("version", "name", "include", "services", "models", "networks", "volumes",
              "secrets", "configs")  # fmt: skip
_SECTIONS = ("services", "models", "networks", "volumes", "secrets", "configs")


def _check_included_top_level(data: dict[str, Any], source: str, text: str) -> None:
    """An included file's top level as Compose validates it (the file is a project of its
    own; the including file's schema check never sees what is not imported): a section
    that is null (``volumes:`` with nothing under it) or an unknown key is refused."""
    for key, value in data.items():
        if key in _SECTIONS and value is None:
            raise _error(
                source,
                text,
                (key,),
                f"{key} must be a mapping",
                rule="compose-spec schema (Compose validates an included file against it)",
                fix=f"remove the empty {key}: or write {key}: {{}}",
            )
        if key in ("version", "name") and not isinstance(value, str):
            raise _error(
                source,
                text,
                (key,),
                f"{key} must be a string",
                rule="compose-spec schema (Compose validates an included file against it)",
                fix=f'quote the value: {key}: "..."',
                value=value,
            )
        if key not in _TOP_LEVEL and not str(key).startswith("x-"):
            raise _error(
                source,
                text,
                (key,),
                f"additional properties {key!r} not allowed",
                rule="compose-spec schema (Compose validates an included file against it)",
                fix=f"remove {key}: (or name it x-{key} to keep it as an extension)",
                value=key,
            )


@dataclass(frozen=True)
class _Where:
    """What interpolation needs besides the value: the mode, and the text for locating errors."""

    source: str
    text: str
    env: Mapping[str, str] | None
    mode: Interpolation | None


def _duplicate(source: str, key: str, node: yaml.Node, first: int) -> ComposeInputError:
    """A key given twice in one mapping (go-yaml refuses it, so compose does)."""
    return ComposeInputError(
        f"mapping key {key!r} already defined at line {first + 1}",
        location=Location(file=source, line=node.start_mark.line + 1),
        rule="duplicate-key (compose refuses a key given twice)",
        value=key,
        fix="keep one of them: YAML readers disagree on which one wins",
    )


def _recursive(source: str, node: yaml.Node) -> ComposeInputError:
    """An anchor that contains its own alias."""
    return ComposeInputError(
        "an anchor contains an alias of itself",
        location=Location(file=source, line=node.start_mark.line + 1),
        rule="yaml-recursive-anchor",
        fix="an alias may only name an anchor defined before it, outside itself",
    )


def _interpolate_tree(node: Any, path: PathKey, where: _Where) -> Any:
    """The document with every ``$`` string interpolated; a bad one refused at its line.

    The walk carries no key path (building one per node was most of its cost); only when a
    string is refused is the tree walked again to find where that string is.
    """
    try:
        return _interpolated(node, where)
    except _Refused:
        return _interpolate_located(node, path, where)


class _Refused(Exception):
    """A string interpolation refuses (raised again, located, by the slower walk)."""


def _interpolated(node: Any, where: _Where) -> Any:
    if isinstance(node, str):
        if "$" not in node:
            return node
        try:
            return interpolate(node, where.env, where.mode)
        except InterpolationError:
            raise _Refused from None
    if isinstance(node, dict):
        return {k: _interpolated(v, where) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolated(v, where) for v in node]
    if isinstance(node, Override):
        return Override(_interpolated(node.value, where))
    return node


def _interpolate_located(node: Any, path: PathKey, where: _Where) -> Any:
    if isinstance(node, Override):
        return Override(_interpolate_located(node.value, path, where))
    if isinstance(node, Reset):
        return node
    if isinstance(node, dict):
        return {k: _interpolate_located(v, (*path, str(k)), where) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate_located(v, (*path, i), where) for i, v in enumerate(node)]
    if isinstance(node, str) and "$" in node:
        try:
            return interpolate(node, where.env, where.mode)
        except InterpolationError as exc:
            raise ComposeInputError(
                str(exc),
                location=locate(merged_lines(((where.source, where.text),)), path, where.source),
                rule="interpolation",
                fix=f"set {exc.name} in the environment"
                if isinstance(exc, MissingVariable)
                else "use ${NAME}, ${NAME:-default} or ${NAME:?message}; write $$ for a literal $",
            ) from None
    return node
