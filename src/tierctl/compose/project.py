"""A compose project as ``docker compose config --format json`` prints it, read by tierctl.

:func:`project_config` reads the files with tierctl's own reader (:mod:`tierctl.compose.loader`:
YAML, anchors, ``!reset``/``!override``, interpolation, ``include``, ``extends``), turns every
service's short syntaxes into the long forms Compose prints (:mod:`tierctl.compose.long_forms`)
file by file, merges the files with Compose's rules (:mod:`tierctl.compose.merge`), selects the
services of the active profiles, reads ``env_file`` into ``environment`` and resolves paths
against the project folder. ``tierctl compose config`` prints the result; the differential
suite compares it with the real binary's (:mod:`tierctl.compose.binary`).

Where Compose refuses a project this module raises a located
:class:`~tierctl.errors.ComposeInputError` (file:line, rule, value, fix).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.compose.casts import (
    cast_strings,
    float32,
    go_field_path,
    go_int,
    negative_unsigned,
)
from tierctl.compose.compose_file import ComposeFile
from tierctl.compose.dotenv import DotenvError, read_dotenv, read_raw_env
from tierctl.compose.forms import (
    FormError,
    normalise_depends_on,
    scalar_text,
    split_command,
)
from tierctl.compose.interpolation import Interpolation
from tierctl.compose.lines import locate, merged_lines
from tierctl.compose.loader import has_document, load_compose
from tierctl.compose.long_forms import (
    PUBLISHED_INT,
    absolute,
    format_duration,
    go_path_clean,
    long_ports,
    parse_bytes,
    parse_device,
    parse_duration_ns,
    parse_port,
    parse_volume,
    unique_by,
    unique_ports,
)
from tierctl.compose.merge import merge_data, strip_tags
from tierctl.compose.profiles import active_profiles
from tierctl.compose.tags import Override, Reset
from tierctl.compose.unique_items import UniqueLists, duplicates, equal_items_text
from tierctl.errors import ComposeInputError, Location
from tierctl.readers import read_text

#: A check run on each file as read (the CLI passes the compose-spec schema's).
FileCheck = Callable[[ComposeFile], None]

# mem_swappiness is a byte size to compose-go too (UnitBytes): ``60`` prints as "60", ``1g``
# as "1073741824" (found by a sweep of every numeric service key against the binary).
_SIZES = ("shm_size", "mem_limit", "memswap_limit", "mem_reservation", "mem_swappiness")
#: Service keys compose-go decodes into a Go int64: an int past int64 is converted as Go
#: converts what YAML decoded (a uint64 wraps, a float64 becomes the smallest int64).
_INT64 = (
    "cpu_count", "cpu_shares", "cpu_quota", "cpu_period", "cpu_rt_period", "cpu_rt_runtime",
    "pids_limit", "scale",
)  # fmt: skip
#: Numeric service keys Compose leaves out when 0 (``omitempty``; ``scale`` is a pointer).
_ZERO_OMITTED = (
    *_SIZES, *_INT64[:-1], "cpu_percent", "cpus", "oom_score_adj",
)  # fmt: skip
_DURATIONS = ("stop_grace_period",)
_HEALTH_DURATIONS = ("interval", "timeout", "start_period", "start_interval")
_ONE_OR_MANY = ("dns", "dns_search", "dns_opt", "tmpfs")


@dataclass(frozen=True)
class ProjectOptions:
    """What ``docker compose`` takes besides the files.

    Attributes:
        profiles: ``--profile`` values (``*`` enables every profile).
        env_files: ``--env-file`` values; default: ``.env`` in the project folder, if any.
        project_directory: ``--project-directory``; default: the first file's folder.
        project_name: ``-p``; default: the files' ``name:``, else the folder's name.
        environ: the process environment (default: this process's).
    """

    profiles: tuple[str, ...] = ()
    env_files: tuple[str, ...] = ()
    project_directory: str | None = None
    project_name: str | None = None
    environ: Mapping[str, str] | None = None


def _refuse(
    message: str, location: Location | None, rule: str, fix: str, value: Any = None
) -> ComposeInputError:
    return ComposeInputError(message, location=location, rule=rule, value=value, fix=fix)


def interpolation_env(options: ProjectOptions, folder: str) -> dict[str, str]:
    """The variables interpolation sees: the env files, then the process environment over them."""
    environ = dict(os.environ if options.environ is None else options.environ)
    files = list(options.env_files)
    if not files and os.path.isfile(os.path.join(folder, ".env")):
        files = [os.path.join(folder, ".env")]
    out: dict[str, str] = {}
    for f in files:
        text = read_text(Path(f), what="env file", error=ComposeInputError)
        try:
            values = read_dotenv(text, f, environ, out)
        except DotenvError as exc:
            raise _refuse(str(exc), Location(file=f, line=exc.line), exc.rule, exc.fix) from None
        out.update({k: v for k, v in values.items() if v is not None})
    out.update(environ)
    return out


def project_config(
    files: Sequence[str | Path],
    options: ProjectOptions | None = None,
    *,
    check: FileCheck | None = None,
) -> dict[str, Any]:
    """The project ``docker compose -f F... config --format json`` prints, read by tierctl.

    Args:
        files: the compose files, in ``-f`` order.
        options: profiles, env files, project folder and name, environment.
        check: run on each file as read (e.g. the compose-spec schema); it raises to refuse.

    Raises:
        ComposeInputError: a project Compose refuses, located at file:line with the rule,
            the value and the fix.
    """
    options = options or ProjectOptions()
    if not files:
        raise _refuse(
            "no compose file given",
            None,
            "compose config reads at least one file",
            "name a file: compose.yaml",
        )
    folder = os.path.abspath(
        options.project_directory or os.path.dirname(os.path.abspath(files[0]))
    )
    env = interpolation_env(options, folder)
    read = [
        load_compose(
            Path(f), env=env, interpolation=Interpolation.STRICT, rebase=True, overlay=i > 0
        )
        for i, f in enumerate(_with_documents(files))
    ]
    if not any(c.tagged for c in read):
        # Nothing left once the includes brought nothing in (`include: []`, empty files).
        raise _refuse(
            "empty compose file",
            Location(file=str(files[0]), line=1),
            "a project defines services or resources, or includes a file that does",
            "add services:, or include a file that defines some",
        )
    merged: dict[str, Any] = {}
    unique = UniqueLists()
    for compose in read:
        compose = _null_services_dropped(compose, merged)
        # Compose casts while it interpolates, and validates the cast document: `cpu_percent:
        # "1.5"` is refused as the float it becomes, not passed as the string it was.
        typed = cast_strings(compose.tagged, functools.partial(_cast_refused, compose))
        if check is not None:
            check(dataclasses.replace(compose, data=strip_tags(typed), raw=typed))
        for service, key, j, i in unique.add_file(compose.tagged.get("services")):
            raise _equal_items(compose, service, key, j, i)
        merged = long_ports(merge_data(merged, canonical_document(typed, compose)))
    data = strip_tags(merged)
    texts = tuple(t for c in read for t in c.texts)
    where = _Where(texts, str(files[-1]))
    in_file: tuple[Any, bool] = data.get("name"), data.get("name") not in (None, "")
    if in_file[0] == "" and any(_NAMED.search(text) for _, text in texts):
        # `name: ${UNSET-}` names the project, with an empty name (refused below); an empty
        # `name: ""` names none (the folder's name is used), as Compose reads them.
        in_file = None, True
    name = _project_name(options.project_name, in_file, folder, env, where)
    if not options.profiles:
        # Compose falls back to COMPOSE_PROFILES (the environment or .env) without --profile.
        options = dataclasses.replace(options, profiles=active_profiles((), env) or ())
    return _finish(data, name, folder, env, options, where)


def _with_documents(files: Sequence[str | Path]) -> Sequence[str | Path]:
    """The ``-f`` files Compose reads: of several, one without a YAML document (empty, only
    comments) adds nothing and is passed over; none left is "empty compose file"."""
    if len(files) < 2:
        return files
    kept = [
        f
        for f in files
        if has_document(read_text(Path(f), what="compose", error=ComposeInputError))
    ]
    if not kept:
        raise _refuse(
            "empty compose file",
            Location(file=str(files[0]), line=1),
            "a project defines services or resources in at least one of its files",
            "add services: to one of the files",
        )
    return kept


#: Top-level sections an override may leave null over an earlier file's mapping.
_NULL_OVER = ("volumes", "networks", "secrets", "configs", "models")


def _null_services_dropped(compose: ComposeFile, merged: dict[str, Any]) -> ComposeFile:
    """An override's ``name: null`` service adds nothing to the earlier files' service (the
    schema sees the merged mapping, as Compose validates it); with no earlier service it is
    refused, as Compose refuses it."""
    sections = [
        k
        for k in _NULL_OVER
        if k in compose.tagged and compose.tagged[k] is None and isinstance(merged.get(k), dict)
    ]
    if sections:
        # `volumes:` with nothing under it adds nothing to an earlier file's volumes (the
        # schema sees the merged mapping); with none earlier the schema refuses it.
        def unsectioned(doc: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in doc.items() if k not in sections}

        raw_doc = unsectioned(compose.raw) if compose.raw is not None else None
        compose = dataclasses.replace(compose, data=unsectioned(compose.data), raw=raw_doc)
    services = compose.tagged.get("services")
    nulls = (
        [n for n, body in services.items() if body is None] if isinstance(services, dict) else []
    )
    if not nulls:
        return compose
    below = merged.get("services")
    earlier: dict[str, Any] = below if isinstance(below, dict) else {}
    for name in nulls:
        if not isinstance(earlier.get(name), dict):
            raise _refuse(
                f"validating {compose.source}: services.{name} must be a mapping",
                compose.location("services", name),
                "each service is a mapping of compose keys (null only over an earlier "
                "file's service)",
                f"write the service as a mapping (services: {{{name}: {{image: ...}}}})",
            )

    def kept(doc: dict[str, Any]) -> dict[str, Any]:
        body = doc.get("services")
        if not isinstance(body, dict):
            return doc
        return {**doc, "services": {n: v for n, v in body.items() if n not in nulls}}

    raw = kept(compose.raw) if compose.raw is not None else None
    return dataclasses.replace(compose, data=kept(compose.data), raw=raw)


def _cast_refused(
    compose: ComposeFile, error: FormError, path: tuple[str | int, ...]
) -> ComposeInputError:
    """A string at a typed key that Compose's interpolation cannot cast, located."""
    dotted = ".".join(str(p) for p in path)
    return _refuse(
        f"error while interpolating {dotted}: {error}",
        compose.location(*path),
        error.rule,
        error.fix,
    )


def _equal_items(compose: ComposeFile, service: str, key: str, j: int, i: int) -> ComposeInputError:
    """Compose's schema check refusing two items of a merged list as equal."""
    message, rule, fix = equal_items_text(key, j, i)
    return _refuse(message, compose.location("services", service, key), rule, fix)


def json_form(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as ``docker compose config --format json`` prints it (the YAML form is
    ``config`` itself): compose-go's JSON leaves out the ``x-*`` extensions of its typed
    values below the top level (a service's, its deploy's, a port's, a mount's, a volume's:
    ``json:"-"``) and prints an empty list inside a top-level ``x-*`` value as ``null`` (an
    empty Go slice of an untyped value). Free-form maps (environment, labels, the names of
    services) keep their ``x-`` keys: those are names, not extensions."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if _extension(key):
            out[key] = _nulled_empty_lists(value)
        elif key in _NAMED_BODIES and isinstance(value, dict):
            kinds = _SERVICE_PARTS if key == "services" else {}
            out[key] = {n: _typed(body, kinds) for n, body in value.items()}
            if key == "services":
                out[key] = {n: _blkio_json(body) for n, body in out[key].items()}
        else:
            out[key] = value
    return out


def _blkio_json(service: Any) -> Any:
    """compose-go's blkio device entries have no JSON names: its JSON prints their Go field
    names (``Path``, ``Rate``, ``Weight``); its YAML keeps ``path``/``rate``/``weight``."""
    blkio = service.get("blkio_config") if isinstance(service, dict) else None
    if not isinstance(blkio, dict):
        return service
    fixed = {
        key: [
            {k[:1].upper() + k[1:]: v for k, v in e.items()} if isinstance(e, dict) else e
            for e in entries
        ]
        if key in (*_BLKIO_RATES, "weight_device") and isinstance(entries, list)
        else entries
        for key, entries in blkio.items()
    }
    return {**service, "blkio_config": fixed}


#: Top-level maps of name -> typed body (their bodies' x-* keys are extensions).
_NAMED_BODIES = ("services", "volumes", "networks", "configs", "secrets", "models")
#: The typed parts of a service (their own x-* keys are extensions too), with theirs.
_SERVICE_PARTS: dict[str, dict[str, Any]] = {
    "deploy": {"resources": {"limits": {}, "reservations": {}}, "restart_policy": {}},
    "healthcheck": {},
    "build": {},
    "logging": {},
    "ports": {},
    "volumes": {},
    "develop": {},
}


def _typed(value: Any, parts: dict[str, Any]) -> Any:
    """A typed value without its x-* keys (each of a list's entries, for ports and mounts)."""
    if isinstance(value, list):
        return [_typed(v, parts) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: _typed(v, parts[k]) if k in parts else v for k, v in value.items() if not _extension(k)
    }


def _extension(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("x-")


def _nulled_empty_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _nulled_empty_lists(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nulled_empty_lists(v) for v in value] or None
    return value


@dataclass(frozen=True)
class _Where:
    texts: tuple[tuple[str, str], ...]
    default: str

    def at(self, *path: str | int) -> Location:
        return locate(merged_lines(self.texts), tuple(path), self.default)


def normalize_project_name(name: str) -> str:
    """compose-go's ``NormalizeProjectName``: lower case, only ``a-z 0-9 _ -``, no leading
    ``_`` or ``-``."""
    return re.sub(r"[^a-z0-9_-]", "", name.lower()).lstrip("_-")


#: A top-level ``name:`` whose written value is not empty (compose-go's "named in YAML").
_NAMED = re.compile(r"(?m)^name[ \t]*:[ \t]*(?!\"\"|''|#|$)\S")
_NAME_RULE = (
    "a project name is lower-case letters, digits, - and _, and starts with a letter or digit"
)


def _project_name(
    given: str | None,
    in_file: tuple[Any, bool],
    folder: str,
    env: Mapping[str, str],
    where: _Where,
) -> str:
    """The project's name as Compose picks it: ``-p`` (else ``COMPOSE_PROJECT_NAME``) as
    given, refused unless already normal; else the files' ``name:`` normalised; else the
    folder's name normalised; an empty result is refused. ``in_file``: the merged ``name:``
    and whether a file names the project."""
    where_given = Location(file="(command line)", path="project_name")
    if not given and env.get("COMPOSE_PROJECT_NAME"):
        given = env["COMPOSE_PROJECT_NAME"]
        where_given = Location(file="(environment)", path="COMPOSE_PROJECT_NAME")
    if given:
        if normalize_project_name(given) != given:
            raise _refuse(
                f"invalid project name {given!r}: must consist only of lowercase alphanumeric "
                "characters, hyphens, and underscores as well as start with a letter or number",
                where_given,
                _NAME_RULE,
                f"use {normalize_project_name(given) or 'a name like tier-1'!r}",
                given,
            )
        return given
    written, named = in_file
    if named:
        name = normalize_project_name(str(written or ""))
        location = where.at("name")
    else:
        name = normalize_project_name(os.path.basename(folder.rstrip("/")))
        location = Location(file=folder, path="(the project folder's name)")
    if not name:
        raise _refuse(
            "project name must not be empty",
            location,
            _NAME_RULE + " (Compose drops every other character)",
            "write name: tier-1 in the compose file, or pass a project name",
            written,
        )
    return name


# --- one file: short syntaxes to long forms ----------------------------------------------


def canonical_document(tagged: dict[str, Any], compose: ComposeFile) -> dict[str, Any]:
    """One file's document with every service in its long forms (tags kept for the merge)."""
    services = tagged.get("services")
    if not isinstance(services, dict):
        return tagged
    out = dict(tagged)
    out["services"] = {
        name: _canonical_service(str(name), body, compose) if isinstance(body, dict) else body
        for name, body in services.items()
    }
    return out


def _canonical_service(name: str, body: dict[str, Any], compose: ComposeFile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        try:
            out[key] = _tagged(value, functools.partial(_canonical_key, str(key)))
        except FormError as exc:
            raise _refuse(
                str(exc), compose.location("services", name, key), exc.rule, exc.fix, value
            ) from None
    return out


def _number(value: Any, what: str) -> float:
    """A number written as a number or a string (``cpus: "0.5"``)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise FormError(
            f"{what} must be a number, not {value!r}",
            rule=f"{what} is a number of CPUs (0.5, 2)",
            fix=f"write {what}: 0.5",
        ) from None


def _tagged(value: Any, form: Callable[[Any], Any]) -> Any:
    if isinstance(value, Reset):
        return value
    if isinstance(value, Override):
        return Override(form(strip_tags(value.value)))
    out = form(strip_tags(value))
    if isinstance(value, dict) and isinstance(out, dict):
        # `FOO: !reset` inside a map removes FOO from what came before: keep the tag.
        out.update({k: v for k, v in value.items() if isinstance(v, Reset)})
    return out


def _key_text(key: Any, where: str) -> str:
    if not isinstance(key, str):
        raise FormError(
            f"non-string key in {where}: {key}",
            rule="compose reads every key of this mapping as a string",
            fix=f"quote the key: '{key}'",
        )
    return key


def _mapping(value: Any, where: str, *, bare: Any) -> dict[str, Any]:
    """environment/labels/args in map or list form, as a map (``bare`` for ``KEY`` alone)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {
            _key_text(k, where): bare if v is None else scalar_text(v) for k, v in value.items()
        }
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for item in value:
            key, sep, val = scalar_text(item).partition("=")
            # A key with a trailing space (`- DEBUG = true`) is kept as written and refused
            # once the files are merged (_check_spaced_keys), as Compose refuses it: an
            # override's `!reset` or `!override` of the list removes it first.
            out[key] = val if sep else bare
        return out
    raise FormError(
        f"{where} must be a mapping or a list of KEY=VALUE",
        rule="compose environment/labels syntax",
        fix="write a mapping or a list of KEY=VALUE strings",
    )


def _one_or_many(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [scalar_text(v) for v in value]
    return [scalar_text(value)]


def _env_files(value: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for entry in value if isinstance(value, list) else [value]:
        if isinstance(entry, dict):
            form = {"path": str(entry.get("path")), "required": entry.get("required", True)}
            if entry.get("format") not in (None, ""):
                form["format"] = entry["format"]
            out.append(form)
        else:
            out.append({"path": str(entry), "required": True})
    return out


def _ports(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise FormError(
            "ports must be a list",
            rule="compose ports syntax",
            fix="write ports: ['8000:80']",
        )
    return [long for entry in value for long in parse_port(entry)]


def _volumes(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise FormError(
            "volumes must be a list",
            rule="compose volumes syntax",
            fix="write volumes: ['./m:/m']",
        )
    # Compose's first unicity pass, on the mounts as written: a short mount is keyed by its
    # container path cleaned (`./a:/data/` and `./b:/data` are one mount, the later one), a
    # long one by its target as written; the long forms keep their targets as written, and
    # two that are equal only once cleaned are refused after the merge ("already mounted").
    value = unique_by(value, _written_mount_key)
    return [parse_volume(v) if isinstance(v, str) else dict(v) for v in value]


def _written_mount_key(entry: Any) -> str:
    if isinstance(entry, dict):
        return str(entry.get("target", ""))
    try:
        target = parse_volume(str(entry)).get("target")
    except FormError:
        return str(entry)
    return go_path_clean(target) if isinstance(target, str) and target else str(target)


def _health(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = dict(value)
    test = out.get("test")
    if isinstance(test, str):
        out["test"] = ["CMD-SHELL", test]
    for key in _HEALTH_DURATIONS:
        if isinstance(out.get(key), str):
            out[key] = _duration_or_raw(out[key])
    retries = out.get("retries")
    if isinstance(retries, float):  # a uint64 in compose-go: truncated (2.5 is 2)
        out["retries"] = _go_int64(retries)
    return out


def _duration_or_raw(value: str) -> str:
    """A duration in Go's spelling, or the text as written when it is not one: Compose parses
    durations after merging, so a bad one a later file replaces is no error
    (:func:`_check_durations` refuses one that stays)."""
    try:
        return format_duration(parse_duration_ns(value))
    except FormError:
        return value


def _check_unsigned(services: dict[str, Any], where: _Where) -> None:
    """Refuse a negative value at a key compose-go decodes as unsigned (retries, parallelism,
    max_attempts, max_replicas_per_node, a port's target) and negative deploy replicas, in
    Compose's words."""
    for name, svc in services.items():
        deploy = svc.get("deploy")
        replicas = deploy.get("replicas") if isinstance(deploy, dict) else None
        if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
            raise _refuse(
                f"services.{name}.deploy.replicas: must be greater than or equal to 0",
                where.at("services", name, "deploy", "replicas"),
                "deploy.replicas is a count of containers",
                "write replicas: 1",
                replicas,
            )
        found = negative_unsigned(svc)
        if found is not None:
            path, kind, value = found
            raise _refuse(
                f"{go_field_path(name, path)!r} cannot parse value as {kind!r}: "
                f"{value} overflows uint",
                where.at("services", name, *path),
                "a count or a port here is not negative",
                "write 0 or more",
                value,
            )


def _check_durations(services: dict[str, Any], where: _Where) -> None:
    """Refuse a duration the merged project still holds that is not one, as Compose does."""
    for name, svc in services.items():
        health = svc.get("healthcheck")
        places: list[tuple[tuple[str, ...], Any]] = [((k,), svc.get(k)) for k in _DURATIONS]
        if isinstance(health, dict):
            places += [(("healthcheck", k), health.get(k)) for k in _HEALTH_DURATIONS]
        for path, value in places:
            if not isinstance(value, str):
                continue
            try:
                parse_duration_ns(value)
            except FormError as exc:
                raise _refuse(
                    str(exc), where.at("services", name, *path), exc.rule, exc.fix, value
                ) from None


#: The KEY=VALUE lists of a service (and of its build), as (path, what the message calls it).
_KEYED_LISTS = (
    (("environment",), "environment"),
    (("labels",), "labels"),
    (("annotations",), "annotations"),
    (("sysctls",), "sysctls"),
    (("build", "args"), "build.args"),
    (("build", "labels"), "build.labels"),
)


def _check_spaced_keys(services: dict[str, Any], where: _Where) -> None:
    """Refuse a ``KEY =VALUE`` entry the merged project still holds, as Compose does."""
    for name, svc in services.items():
        for path, what in _KEYED_LISTS:
            value: Any = svc
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            if not isinstance(value, dict):
                continue
            for key, val in value.items():
                if isinstance(key, str) and key != key.rstrip():
                    raise _refuse(
                        f"'{what}' variable {key.rstrip()} is declared with a trailing space",
                        where.at("services", name, *path),
                        "a list entry is KEY=VALUE with no space around '='",
                        f"write {key.strip()}={str(val or '').strip()}",
                        key,
                    )


def _resources(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for part in ("limits", "reservations"):
        block = out.get(part)
        if not isinstance(block, dict):
            continue
        block = dict(block)
        cpus = block.get("cpus")
        if isinstance(cpus, int) and not isinstance(cpus, bool) and not _in_int64(cpus):
            raise FormError(
                f"deploy.resources.{part}.cpus: unexpected value type "
                f"{'uint64' if 0 <= cpus < 2**64 else 'float64'} for cpus",
                rule="cpus is a number of CPUs (a float32 to Compose)",
                fix="write cpus: 0.5",
            )
        if cpus is not None:
            block["cpus"] = float32(_number(cpus, "cpus"))
        pids = block.get("pids")
        if isinstance(pids, int | float) and not isinstance(pids, bool):
            block["pids"] = _go_int64(pids)
        if "memory" in block and block["memory"] is not None:
            block["memory"] = str(parse_bytes(block["memory"]))
        devices = block.get("devices")
        if isinstance(devices, list):
            block["devices"] = [_device_request(d) for d in devices]
        out[part] = block
    return out


def _device_request(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    out = dict(entry)
    if "count" in out:
        count = out["count"]
        out["count"] = -1 if str(count).lower() == "all" else int(_number(count, "count"))
    elif "device_ids" not in out:
        out["count"] = -1  # neither count nor ids: every device, as Compose reads it
    return out


def _deploy(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = dict(value)
    out["resources"] = _resources(out.get("resources") or {})
    out.setdefault("placement", {})
    replicas = out.get("replicas")
    if isinstance(replicas, int | float) and not isinstance(replicas, bool):
        out["replicas"] = _go_int64(replicas)  # so that 2**63 is refused as negative
    for part in ("update_config", "rollback_config"):
        config = out.get(part)
        ratio = config.get("max_failure_ratio") if isinstance(config, dict) else None
        if isinstance(ratio, int | float) and not isinstance(ratio, bool):
            # a float32 in compose-go's model
            out[part] = {**config, "max_failure_ratio": float32(float(ratio))}  # type: ignore[dict-item]
    return out


def _depends_on(value: Any) -> Any:
    if isinstance(value, dict):
        for dep, spec in value.items():
            if isinstance(spec, dict) and "condition" not in spec:
                raise FormError(
                    f"depends_on.{dep} missing property 'condition'",
                    rule="the long depends_on syntax needs a condition",
                    fix=f"write {dep}: {{condition: service_started}} (or list the name)",
                )
    return normalise_depends_on(value)


def _extra_hosts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [f"{k}={x}" for k, v in value.items() for x in (v if isinstance(v, list) else [v])]
    if isinstance(value, list):
        pair = duplicates(value)
        if pair is not None:  # the schema's uniqueItems: neither of its forms then matches
            raise FormError(
                f"extra_hosts must be a mapping (items {pair[0]} and {pair[1]} of the list are "
                "equal, which its list form does not allow)",
                rule="compose-spec schema: extra_hosts is a list of unique entries or a mapping",
                fix="give each host once",
            )
    out = []
    for entry in value if isinstance(value, list) else [value]:
        text = str(entry)
        if "=" not in text:
            host, colon, ip = text.partition(":")
            if not colon:
                raise FormError(
                    f"invalid additional host, missing IP: {text}",
                    rule="an extra host is HOST:IP or HOST=IP",
                    fix=f"write {text}=IP",
                )
            text = f"{host}={ip}"
        out.append(text)
    return out


def _networks(value: Any) -> Any:
    if isinstance(value, list):
        return {str(n): None for n in value}
    return value


def _build(value: Any) -> Any:
    """One file's ``build`` as a map; the defaults (context ``.``, ``Dockerfile``) are the
    merged project's (:func:`_finish_build`): an override's ``build: {args: ...}`` keeps the
    base's context and dockerfile."""
    if isinstance(value, str):
        return {"context": value}
    if isinstance(value, dict):
        out = dict(value)
        if "args" in out:
            out["args"] = _mapping(out["args"], "build.args", bare=None)
        if "labels" in out:
            out["labels"] = _mapping(out["labels"], "build.labels", bare="")
        if "secrets" in out:  # the service's short and long forms
            out["secrets"] = _refs(out["secrets"])
        for key in ("provenance", "sbom"):  # strings to compose-go: true prints as "true"
            if isinstance(out.get(key), bool):
                out[key] = "true" if out[key] else "false"
        size = out.get("shm_size")
        if isinstance(size, int | float | str) and not isinstance(size, bool):
            out["shm_size"] = _size(size)
        return out
    return value


def _size(value: int | float | str) -> str:
    """A byte size as compose-go's UnitBytes holds it: a string of bytes; a float or an int
    past int64 decodes to 0 (left out)."""
    if isinstance(value, float) or (isinstance(value, int) and not _in_int64(value)):
        return "0"
    return str(parse_bytes(value))


def _refs(value: Any) -> Any:
    if isinstance(value, list):
        return [{"source": str(v)} if not isinstance(v, dict) else _ref(v) for v in value]
    return value


def _ref(entry: dict[str, Any]) -> dict[str, Any]:
    """A long ``secrets``/``configs`` entry with its ``mode`` as Compose prints it."""
    out = dict(entry)
    if "mode" in out and out["mode"] is not None:
        out["mode"] = file_mode(out["mode"])
    return out


def file_mode(value: Any) -> str:
    """A file mode as Compose prints it: octal with a leading 0 (``288`` and ``"440"`` are
    ``"0440"``, ``0`` is ``"00"``); a string is read as octal digits."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        number = None
    elif isinstance(value, str):
        number = int(value, 8) if re.fullmatch(r"[0-7]+", value.strip()) else None
    elif isinstance(value, int):
        # Compose decodes an int64 (past it: "unexpected value type uint64"); float() of a
        # 105-digit int was an OverflowError here.
        number = value if 0 <= value < 2**63 else None
    else:
        number = int(value) if value.is_integer() and value >= 0 else None
    if number is None:
        raise FormError(
            f"invalid file mode {_short(repr(value))}",
            rule="a secret's or config's mode is a file mode (0440, or the number 288)",
            fix="write mode: 0440",
        )
    return f"0{number:o}"


def _ulimits(value: Any) -> Any:
    """``ulimits`` with every limit a number (a string is cast, as interpolation casts it);
    a zero is left out, as Compose's JSON leaves it out (``core: 0`` prints as ``{}``)."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for name, limit in value.items():
        if isinstance(limit, dict):
            out[name] = {k: n for k, v in limit.items() if (n := _limit(v, f"{name}.{k}")) != 0}
        else:
            number = _limit(limit, str(name))
            out[name] = number if number != 0 else {}
    return out


def _limit(value: Any, where: str) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            raise FormError(
                f"ulimits.{where}: failed to cast to expected type: {value!r} is not an integer",
                rule="a ulimit is an integer (or soft/hard integers)",
                fix=f"write ulimits: {{{where.split('.')[0]}: 65535}}",
            )
        # Compose casts with Go's strconv.Atoi (int64): casts.go_int, which also never
        # int()s 4,300+ digits (Python's limit raised ValueError before any check ran)
        try:
            number = go_int(text)
        except FormError as exc:
            raise FormError(
                f"ulimits.{where}: {exc}",
                rule="a ulimit is a 64-bit integer (what Compose's strconv.Atoi reads)",
                fix=f"write ulimits: {{{where.split('.')[0]}: 65535}}",
            ) from None
        return number
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        # YAML decodes an int past int64 as uint64 (up to 2**64) or float64, which Compose
        # refuses for a ulimit ("invalid type uint64 for external"); under soft/hard, Compose
        # v2.40.3 panics on it (an interface conversion).
        kind = "uint64" if 0 <= value < 2**64 else "float64"
        raise FormError(
            f"ulimits.{where}: invalid type {kind} for external ({_short(str(value))})",
            rule="a ulimit is a 64-bit integer (what Compose decodes it into)",
            fix=f"write ulimits: {{{where.split('.')[0]}: 65535}}",
        )
    return value


_BLKIO_RATES = ("device_read_bps", "device_read_iops", "device_write_bps", "device_write_iops")


def _blkio(value: Any) -> Any:
    """``blkio_config`` with each device rate as compose-go holds it: a byte size, printed
    as a string of bytes (``12mb`` is "12582912", ``30`` is "30")."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key in _BLKIO_RATES:
        entries = out.get(key)
        if isinstance(entries, list):
            out[key] = [
                {**e, "rate": str(parse_bytes(e["rate"]))}
                if isinstance(e, dict)
                and isinstance(e.get("rate"), int | str)
                and not isinstance(e.get("rate"), bool)
                else e
                for e in entries
            ]
    return out


def _in_int64(value: int) -> bool:
    return -(2**63) <= value < 2**63


def _go_int64(value: int | float) -> int:
    """``value`` (a YAML number) as compose-go's int64: Go decodes a YAML int past int64 as a
    uint64 (which the conversion wraps) or, past that, a float64; a float64 converts by
    truncation (``1.7`` is 1), and one out of range (or not finite) becomes the smallest
    int64, as on amd64."""
    if isinstance(value, float):
        if math.isfinite(value) and -(2.0**63) <= value < 2.0**63:
            return math.trunc(value)
        return -(2**63)
    if _in_int64(value):
        return value
    if 0 <= value < 2**64:
        return value - 2**64
    return -(2**63)


def _short(text: str, keep: int = 40) -> str:
    """``text`` cut to ``keep`` characters for a message (a 5,000-digit value stays readable)."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text):,} characters)"


def _canonical_key(key: str, value: Any) -> Any:
    """One service key's long form (what Compose prints for it)."""
    if value is None:
        return None
    if key in ("command", "entrypoint"):
        return list(split_command(value) or ())
    if key == "environment":
        return _mapping(value, "environment", bare=None)
    if key in ("labels", "annotations"):
        return _mapping(value, key, bare="")
    if key == "sysctls":
        return _mapping(value, key, bare="")
    if key == "env_file":
        return _env_files(value)
    if key == "ports":
        _ports(value)  # refused here, in its file; read in long form once merged (_finish)
        return [scalar_text(p) if isinstance(p, int) else p for p in value]
    if key in ("expose", "group_add"):  # both lists of strings to Compose
        return [scalar_text(v) for v in value] if isinstance(value, list) else value
    if key == "volumes":
        return _volumes(value)
    if key == "devices":
        return [parse_device(d) for d in value] if isinstance(value, list) else value
    if key == "gpus":
        # Compose holds `gpus:` as device requests: `all` is one request for every GPU
        # (count -1), a list's entries read as deploy's device reservations.
        if value == "all":
            return [{"count": -1}]
        return [_device_request(d) for d in value] if isinstance(value, list) else value
    if key in _ONE_OR_MANY:
        return _one_or_many(value)
    if key == "depends_on":
        return _depends_on(value)
    if key == "healthcheck":
        return _health(value)
    if key == "deploy":
        return _deploy(value)
    if key in _SIZES:
        return _size(value)
    if key in _INT64 and isinstance(value, int | float) and not isinstance(value, bool):
        number = _go_int64(value)
        if key == "scale" and number < 0:
            raise FormError(
                "scale: must be greater than or equal to 0",
                rule="scale is a count of containers"
                + ("" if number == value else f" ({_short(str(value))} is past int64)"),
                fix="write scale: 1",
            )
        return number
    if key in _DURATIONS and isinstance(value, str):
        return _duration_or_raw(value)
    if key == "cpus":
        return float32(_number(value, "cpus"))
    if key == "extra_hosts":
        return _extra_hosts(value)
    if key == "networks":
        return _networks(value)
    if key == "build":
        return _build(value)
    if key in ("secrets", "configs"):
        return _refs(value)
    if key == "ulimits":
        return _ulimits(value)
    if key == "blkio_config":
        return _blkio(value)
    if key == "profiles":
        return [scalar_text(v) for v in value] if isinstance(value, list) else value
    return value


# --- the merged project ------------------------------------------------------------------


def _active(service: dict[str, Any], profiles: tuple[str, ...]) -> bool:
    own = service.get("profiles") or []
    return not own or "*" in profiles or any(p in profiles for p in own)


def _refuse_non_string_keys(data: dict[str, Any], where: _Where) -> None:
    """A service, network, volume, secret or config named by a YAML number, boolean or null
    (``5:``, ``-.inf:``) is refused as Compose refuses it ("non-string key in services: 5");
    sorting the names was a TypeError (float against str)."""
    for section in ("services", "networks", "volumes", "secrets", "configs"):
        block = data.get(section)
        if not isinstance(block, dict):
            continue
        for key in block:
            if not isinstance(key, str):
                raise _refuse(
                    f"non-string key in {section}: {_go_text(key)}",
                    where.at(section),
                    f"a name in {section} is a string",
                    f'quote the name: "{_go_text(key)}":',
                    key,
                )


def _go_text(value: Any) -> str:
    """``value`` as Go's ``%v`` prints a decoded YAML scalar (``-Inf``, ``true``, ``<nil>``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return f"{value:g}" if value.is_integer() and abs(value) < 1e21 else repr(value)
    return str(value)


def _finish(
    data: dict[str, Any],
    name: str,
    folder: str,
    env: dict[str, str],
    options: ProjectOptions,
    where: _Where,
) -> dict[str, Any]:
    _refuse_non_string_keys(data, where)
    services_in = data.get("services") or {}
    services = {n: s for n, s in services_in.items() if _active(s, options.profiles)}
    out_services = {
        sname: _finish_service(sname, services, data, folder, env, where)
        for sname in sorted(services)
    }
    uses_default = any("default" in (s.get("networks") or {}) for s in out_services.values())
    _refuse_cycles(out_services, where)
    _refuse_shared_container_names(out_services, where)
    # every service, active or not: Compose decodes the whole model before profiles apply
    _check_durations({n: s for n, s in services_in.items() if isinstance(s, dict)}, where)
    _check_unsigned({n: s for n, s in services_in.items() if isinstance(s, dict)}, where)
    _check_spaced_keys({n: s for n, s in services_in.items() if isinstance(s, dict)}, where)
    _refuse_unsourced(data, where)
    out: dict[str, Any] = {"name": name}
    networks = {n: _network(v) for n, v in (data.get("networks") or {}).items()}
    if uses_default:
        networks.setdefault("default", {})
    used_networks = {n for s in out_services.values() for n in s.get("networks") or {}}
    kept = {n: v for n, v in networks.items() if n in used_networks}
    if kept:
        out["networks"] = {
            n: _named(v, name, n) | ({"ipam": {}} if "ipam" not in (v or {}) else {})
            for n, v in kept.items()
        }
    out["services"] = out_services
    out.update(_used_resources(data, out_services, name, folder))
    out.update({k: v for k, v in data.items() if isinstance(k, str) and k.startswith("x-")})
    escaped: dict[str, Any] = _escape(out)
    return escaped


def _finish_service(
    sname: str,
    services: dict[str, Any],
    data: dict[str, Any],
    folder: str,
    env: dict[str, str],
    where: _Where,
) -> dict[str, Any]:
    """One active service as Compose prints it, refusing what Compose refuses of it."""
    svc = dict(services[sname])
    volumes = data.get("volumes") or {}
    for dep, spec in (svc.get("depends_on") or {}).items():
        if dep not in services and (not isinstance(spec, dict) or spec.get("required", True)):
            raise _refuse(
                f'service "{sname}" depends on undefined service "{dep}": invalid compose project',
                where.at("services", sname, "depends_on"),
                "depends_on names a service of the project (in an active profile)",
                f"define {dep}, enable its profile, or mark it required: false",
                dep,
            )
    if not svc.get("image") and not svc.get("build"):
        raise _refuse(
            f'service "{sname}" has neither an image nor a build context specified: '
            "invalid compose project",
            where.at("services", sname),
            "every service names an image or a build",
            f"add image: to {sname} (or build:), or merge this file over the one that does",
        )
    if isinstance(svc.get("ports"), list):
        svc["ports"] = unique_ports(_ports(svc["ports"]))
    svc.setdefault("command", None)
    svc.setdefault("entrypoint", None)
    svc = _environment(svc, sname, folder, env, where)
    svc["volumes"] = [_mount(v, sname, folder, volumes, where) for v in svc.get("volumes") or []]
    _refuse_shared_targets(svc["volumes"], sname, where)
    if not svc["volumes"]:
        del svc["volumes"]
    if "build" in svc and isinstance(svc["build"], dict):
        svc["build"] = _finish_build(svc["build"], folder, env)
    if isinstance(svc.get("secrets"), list):
        svc["secrets"] = [
            {**r, "target": f"/run/secrets/{r.get('source')}"}
            if isinstance(r, dict) and not r.get("target")
            else r
            for r in svc["secrets"]
        ]
    _refuse_undefined_refs(svc, sname, data, where)
    if isinstance(svc.get("networks"), dict):
        svc["networks"] = {n: _attachment(v) for n, v in svc["networks"].items()}
    if "network_mode" not in svc and not svc.get("networks"):
        svc["networks"] = {"default": None}
    finished: dict[str, Any] = _omit_empty(svc)
    return finished


def _used_resources(
    data: dict[str, Any], out_services: dict[str, Any], name: str, folder: str
) -> dict[str, Any]:
    """The top-level volumes, configs and secrets the services use, as Compose prints them."""
    out: dict[str, Any] = {}
    used_volumes = {
        str(m.get("source"))
        for s in out_services.values()
        for m in s.get("volumes", [])
        if isinstance(m, dict) and m.get("type") == "volume"
    }
    declared = data.get("volumes") or {}
    if any(n in used_volumes for n in declared):
        out["volumes"] = {n: _named(v, name, n) for n, v in declared.items() if n in used_volumes}
    for kind in ("configs", "secrets"):
        defined = data.get(kind)
        used = {
            str(r.get("source"))
            for s in out_services.values()
            for r in s.get(kind) or []
            if isinstance(r, dict)
        }
        if kind == "secrets":  # a build's secrets are used too
            used |= {
                str(r.get("source") if isinstance(r, dict) else r)
                for s in out_services.values()
                if isinstance(s.get("build"), dict)
                for r in s["build"].get("secrets") or []
            }
        if isinstance(defined, dict) and any(n in used for n in defined):
            out[kind] = {n: _resource(v, name, n, folder) for n, v in defined.items() if n in used}
    return out


def _finish_build(build: dict[str, Any], folder: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The merged ``build`` as Compose prints it: context (absolute) and dockerfile defaulted,
    a bare arg resolved from the environment (left out when unset), empty lists left out."""
    out = {k: v for k, v in build.items() if v != [] and v != {}}
    out["context"] = absolute(str(build.get("context", ".")), folder)
    out.setdefault("dockerfile", "Dockerfile")
    args = out.get("args")
    if isinstance(args, dict):
        resolved = {k: env.get(k) if v is None else v for k, v in args.items()}
        out["args"] = {k: v for k, v in resolved.items() if v is not None}
        if not out["args"]:
            del out["args"]
    return out


def _refuse_undefined_refs(
    svc: dict[str, Any], sname: str, data: dict[str, Any], where: _Where
) -> None:
    """Compose refuses a service that names a network, secret or config the project does not
    define, and one with both ``network_mode`` and ``networks``."""
    if svc.get("network_mode") and svc.get("networks"):
        raise _refuse(
            f"service {sname} declares mutually exclusive `network_mode` and `networks`: "
            "invalid compose project",
            where.at("services", sname, "networks"),
            "a service joins networks, or uses another's network stack (network_mode), not both",
            f"remove network_mode or networks from {sname}",
        )
    for kind in ("networks", "secrets", "configs"):
        value = svc.get(kind)
        found = data.get(kind)
        defined: dict[str, Any] = found if isinstance(found, dict) else {}
        if isinstance(value, dict):
            names = [str(n) for n in value if n != "default"]
        elif isinstance(value, list):
            names = [str(r.get("source")) for r in value if isinstance(r, dict)]
        else:
            continue
        for ref in names:
            if ref not in defined:
                raise _refuse(
                    f'service "{sname}" refers to undefined {kind[:-1]} {ref}: invalid compose '
                    "project",
                    where.at("services", sname, kind),
                    f"a service's {kind} are defined under the top-level {kind}:",
                    f"add {kind}: {{{ref}: ...}} at the top level, or drop it from {sname}",
                    ref,
                )


def _attachment(value: Any) -> Any:
    """A service's network entry as Compose prints it (empty aliases, priority 0 left out)."""
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if v not in ([], 0, "", False) or v is True}


def _network(value: Any) -> Any:
    """A top-level network as Compose prints it: labels a map, driver options strings, both
    left out when empty."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    if "labels" in out:
        out["labels"] = _mapping(out["labels"], "labels", bare="")
    if isinstance(out.get("driver_opts"), dict):
        out["driver_opts"] = {k: scalar_text(v) for k, v in out["driver_opts"].items()}
    for key in ("labels", "driver_opts"):
        if not out.get(key) and key in out:
            del out[key]
    return out


#: What a top-level secret or config reads its content from, one of which it needs (unless
#: it is external).
_SOURCES = {"secrets": ("file", "environment"), "configs": ("file", "environment", "content")}


def _refuse_unsourced(data: dict[str, Any], where: _Where) -> None:
    """Compose refuses a secret or config that names none of its sources."""
    for kind, sources in _SOURCES.items():
        defined = data.get(kind)
        for name, body in (defined if isinstance(defined, dict) else {}).items():
            spec = body if isinstance(body, dict) else {}
            if spec.get("external") or any(spec.get(k) for k in sources):
                continue
            raise _refuse(
                f"{kind}.{name}: one of {'|'.join(sources)} must be set",
                where.at(kind, name),
                f"a {kind[:-1]} is read from its {' or '.join(sources)}, or is external",
                f"write {name}: {{file: ./{name}.txt}} (or external: true)",
                name,
            )


def _refuse_shared_container_names(services: dict[str, Any], where: _Where) -> None:
    owner: dict[str, str] = {}
    for name, svc in services.items():
        container = svc.get("container_name")
        if not isinstance(container, str) or not container:
            continue  # not a name: the schema check reports it, located
        if container in owner:
            raise _refuse(
                f'services.{name}: container name "{container}" is already in use by service '
                f"{owner[container]}",
                where.at("services", name, "container_name"),
                "a container name belongs to one service",
                f"rename one of them or drop container_name from {name}",
                container,
            )
        owner[container] = name


def _refuse_cycles(services: dict[str, Any], where: _Where) -> None:
    """Compose refuses services that depend on each other in a loop."""
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            loop = (*chain[chain.index(name) :], name)
            raise _refuse(
                f"dependency cycle detected: {' -> '.join(loop)}",
                where.at("services", loop[0], "depends_on"),
                "depends_on may not loop back to a service",
                "remove one of the depends_on entries of the loop",
                list(loop),
            )
        state[name] = 1
        for dep in (services.get(name) or {}).get("depends_on") or {}:
            if dep in services:
                visit(dep, (*chain, name))
        state[name] = 2

    for name in services:
        visit(name, ())


def _escape(node: Any) -> Any:
    """Compose prints a literal ``$`` as ``$$``, so that its output reads back the same."""
    if isinstance(node, str):
        return node.replace("$", "$$")
    if isinstance(node, dict):
        return {k: _escape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_escape(v) for v in node]
    return node


#: Numbers inside deploy that Compose leaves out when 0 (found against the binary).
_DEPLOY_ZERO_OMITTED = (
    ("update_config", "max_failure_ratio"),
    ("rollback_config", "max_failure_ratio"),
    ("placement", "max_replicas_per_node"),
)

#: Service keys Compose prints even when empty (not ``omitempty`` in compose-go's types).
_PRINTED_EMPTY = ("attach", "command", "entrypoint", "init", "networks")


def _omit_empty(svc: dict[str, Any]) -> dict[str, Any]:
    """What Compose's JSON leaves out: empty lists and maps, false, empty strings (Go's
    ``omitempty``), in the service and in its mounts, ports and device requests."""

    def empty(value: Any) -> bool:
        return value is False or value == "" or value == [] or value == {}

    out = {
        k: v
        for k, v in svc.items()
        if k in _PRINTED_EMPTY or not (empty(v) or (k in _ZERO_OMITTED and v in (0, "0")))
    }
    for key in ("volumes", "ports"):
        if isinstance(out.get(key), list):
            out[key] = [
                {k: v for k, v in e.items() if not (v is False or v == "" or k == PUBLISHED_INT)}
                if isinstance(e, dict)
                else e
                for e in out[key]
            ]
    health = out.get("healthcheck")
    if isinstance(health, dict):
        out["healthcheck"] = {k: v for k, v in health.items() if v is not False}
    for entry in out.get("ports") or []:
        if isinstance(entry, dict) and entry.get("target") == 0:
            del entry["target"]
    for entry in out.get("volumes") or []:
        options = entry.get("volume") if isinstance(entry, dict) else None
        if isinstance(options, dict) and options.get("nocopy") is False:
            del options["nocopy"]
    build = out.get("build")
    if isinstance(build, dict):
        out["build"] = {
            k: v
            for k, v in build.items()
            if not (k in ("no_cache", "pull", "privileged") and v is False)
            and not (k == "shm_size" and v == "0")
        }
    blkio = out.get("blkio_config")
    if isinstance(blkio, dict) and blkio.get("weight") == 0:
        out["blkio_config"] = {k: v for k, v in blkio.items() if k != "weight"}
    deploy = out.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    for part in ("limits", "reservations"):
        block = resources.get(part) if isinstance(resources, dict) else None
        if isinstance(block, dict):
            for key in ("cpus", "pids"):
                if block.get(key) == 0:
                    del block[key]
    if isinstance(deploy, dict):
        for part, key in _DEPLOY_ZERO_OMITTED:
            block = deploy.get(part)
            if isinstance(block, dict) and block.get(key) == 0:
                deploy[part] = {k: v for k, v in block.items() if k != key}
    deploy = out.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    if isinstance(resources, dict):
        for part in ("limits", "reservations"):
            block = resources.get(part)
            if isinstance(block, dict) and block.get("devices") == []:
                block.pop("devices")
    return out


def _named(value: Any, project: str, key: str) -> dict[str, Any]:
    """A top-level resource with the name Compose gives it: its own ``name:``, else its key
    when external, else ``PROJECT_KEY`` (the project's name may hold ``_`` itself: an
    external resource of project ``a_b`` was named ``b_KEY``)."""
    body = dict(value) if isinstance(value, dict) else {}
    body.setdefault("name", key if body.get("external") else f"{project}_{key}")
    return body


def _resource(value: Any, project: str, key: str, folder: str) -> dict[str, Any]:
    body = _named(value, project, key)
    if isinstance(body.get("file"), str):
        body["file"] = absolute(body["file"], folder)
    return body


def _mount(mount: Any, service: str, folder: str, volumes: dict[str, Any], where: _Where) -> Any:
    if not isinstance(mount, dict):
        return mount
    out = dict(mount)
    if isinstance(out.get("target"), str):
        out["target"] = go_path_clean(out["target"])  # as compose-go's normalize cleans it
    if out.get("type") == "bind" and "source" not in out:
        # An empty source is the project folder; none at all Compose refuses.
        raise _refuse(
            'invalid mount config for type "bind": field Source must not be empty',
            where.at("services", service, "volumes"),
            "a bind mount names the host path it mounts in source:",
            "add source: ./path (the host folder) to the mount",
            out.get("target"),
        )
    _mount_options(out, service, where)
    if out.get("type") == "bind" and isinstance(out.get("source"), str):
        out["source"] = absolute(out["source"], folder)
    if out.get("type") == "volume" and out.get("source") and out["source"] not in volumes:
        raise _refuse(
            f'service "{service}" refers to undefined volume {out["source"]}: invalid compose '
            "project",
            where.at("services", service, "volumes"),
            "a named volume is declared under the top-level volumes:",
            f"add volumes: {{{out['source']}: {{}}}} or mount a path (./{out['source']})",
            out["source"],
        )
    return out


def _refuse_shared_targets(mounts: list[Any], service: str, where: _Where) -> None:
    """Two mounts on one container path once their targets are cleaned (``/data`` and
    ``/data/``: unicity kept both, as it keys them as written), refused as Compose does."""
    seen: dict[str, int] = {}
    for j, mount in enumerate(mounts):
        target = mount.get("target") if isinstance(mount, dict) else None
        if not isinstance(target, str):
            continue
        if target in seen:
            raise _refuse(
                f"services.{service}.volumes[{j}]: target {target} already mounted as "
                f"services.{service}.volumes[{seen[target]}]",
                where.at("services", service, "volumes"),
                "each mount of a service has a container path of its own",
                f"remove one of the two mounts on {target}, or mount one elsewhere",
                target,
            )
        seen[target] = j


def _mount_options(mount: dict[str, Any], service: str, where: _Where) -> None:
    """A long mount's options as compose-go holds them: ``bind.create_host_path: false`` left
    out (Go's ``omitempty``), ``tmpfs.size`` as a byte size (``1g`` is ``"1073741824"``, 0
    left out); a size that does not parse is refused."""
    bind = mount.get("bind")
    if isinstance(bind, dict) and bind.get("create_host_path") is False:
        mount["bind"] = {k: v for k, v in bind.items() if k != "create_host_path"}
    tmpfs = mount.get("tmpfs")
    if not isinstance(tmpfs, dict) or "size" not in tmpfs:
        return
    out = dict(tmpfs)
    try:
        size = _size(out.pop("size"))
    except FormError:
        raise _refuse(
            f"'services[{service}].volumes.tmpfs.size' invalid size: {tmpfs['size']!r}",
            where.at("services", service, "volumes"),
            "a tmpfs size is a number of bytes with an optional unit b, k, m, g",
            "write size: 64m",
            tmpfs["size"],
        ) from None
    if size != "0":
        out["size"] = size
    mount["tmpfs"] = out


def _environment(
    svc: dict[str, Any], name: str, folder: str, env: dict[str, str], where: _Where
) -> dict[str, Any]:
    """``env_file`` read into ``environment`` (the service's own entries win), bare keys
    resolved from the environment, as Compose prints them."""
    merged: dict[str, Any] = {}
    own = svc.get("environment") or {}
    # An env file's references read the project's variables, then the service's environment,
    # then the env files before it (as Compose reads them).
    resolved = {k: env.get(k) if v is None else v for k, v in own.items()}
    lookup = {**{k: v for k, v in resolved.items() if v is not None}, **env}
    for entry in svc.pop("env_file", None) or []:
        path = absolute(str(entry["path"]), folder)
        form = entry.get("format")
        if form not in (None, "raw"):
            raise _refuse(
                f"unsupported env_file format {form!r}",
                where.at("services", name, "env_file"),
                "an env_file's format is raw, or left out (dotenv)",
                "remove format:, or write format: raw",
                form,
            )
        if not os.path.isfile(path):
            if entry.get("required", True) is False:
                continue
            raise _refuse(
                f"env file {path} not found",
                where.at("services", name, "env_file"),
                "an env_file must exist unless it says required: false",
                "create the file or write - path: FILE, required: false",
                path,
            )
        text = read_text(Path(path), what="env file", error=ComposeInputError)
        try:
            earlier = {k: v for k, v in merged.items() if v is not None}
            if form == "raw":
                values = read_raw_env(text, lookup)
            else:
                values = read_dotenv(text, path, lookup, earlier)
        except DotenvError as exc:
            raise _refuse(str(exc), Location(file=path, line=exc.line), exc.rule, exc.fix) from None
        # A bare KEY nothing has a value for is left out, as Compose leaves it.
        merged.update({k: v for k, v in values.items() if v is not None})
    merged.update(resolved)
    if merged or "environment" in svc:
        svc["environment"] = merged
    if not merged:
        svc.pop("environment", None)
    return svc
