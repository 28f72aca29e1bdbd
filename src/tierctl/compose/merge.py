"""Several compose files merged like ``docker compose -f a -f b``: later files override.

The rules are compose-go's (``override/merge.go`` and ``override/uncity.go``):

- maps merge key by key; a scalar is replaced;
- ``command``, ``entrypoint`` and a healthcheck ``test`` are replaced whole (that is why
  per-replica flags must be rendered, not patched);
- ``environment``, ``labels``, ``sysctls``, ``annotations``, ``extra_hosts`` merge by key in
  either form; ``depends_on`` and ``networks`` merge by name in either form;
- ``logging`` options merge only when both files name the same driver (or one names none);
- other lists are appended, then made unique by their key: a mount by its target (so an
  override that re-points ``/models`` replaces the mount instead of adding a second one),
  ``configs``/``secrets`` by target, ``ports`` by their text, ``devices`` by target,
  ``profiles``, ``cap_add``, ``dns``, a network's ``aliases`` by value, a top-level
  network's ``ipam.config`` by subnet;
- a value tagged ``!reset`` removes the key from what came before, ``!override`` replaces it
  without merging (:mod:`tierctl.compose.tags`).

``extends`` uses the same rules with the base service first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tierctl.compose.compose_file import ComposeFile
from tierctl.compose.forms import (
    DEPENDS_ON_DEFAULTS,
    FormError,
    normalise_environment,
    normalise_labels,
)
from tierctl.compose.long_forms import parse_volume, unique_by, written_port_key
from tierctl.compose.tags import Override, Reset

Path = tuple[str, ...]


def merge_compose(files: Sequence[ComposeFile]) -> ComposeFile:
    """Merge compose files like ``docker compose -f a -f b``: later files override earlier."""
    if len(files) == 1:
        return files[0]
    data: dict[str, Any] = {}
    for f in files:
        data = merge_data(data, f.tagged)
    texts = tuple(t for f in files for t in f.texts)
    as_written = all(f.as_written for f in files)
    return ComposeFile.from_data(
        " + ".join(f.source for f in files), data, texts, as_written=as_written
    )


def merge_data(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """One compose document over another (both as read, ``over`` possibly tagged)."""
    merged = _merge(base, over, ())
    out: dict[str, Any] = enforce_unicity(merged, ())
    return out


def merge_service(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``extends``: a service over its base, with the merge rules of a service."""
    merged = _merge(base, over, ("services", "*"))
    out: dict[str, Any] = enforce_unicity(merged, ("services", "*"))
    return out


def strip_tags(node: Any) -> Any:
    """A document with ``!reset`` values dropped and ``!override`` unwrapped (one file alone)."""
    if isinstance(node, Override):
        return strip_tags(node.value)
    if isinstance(node, dict):
        return {k: strip_tags(v) for k, v in node.items() if not isinstance(v, Reset)}
    if isinstance(node, list):
        return [strip_tags(v) for v in node if not isinstance(v, Reset)]
    return node


def _matches(path: Path, pattern: Path) -> bool:
    return len(path) == len(pattern) and all(
        p in ("*", q) for p, q in zip(pattern, path, strict=True)
    )


def _replace(_: Any, over: Any, __: Path) -> Any:
    return over


def _by_key_map(form: Callable[[Any], dict[str, Any]]) -> Callable[[Any, Any, Path], Any]:
    def merge(base: Any, over: Any, _: Path) -> Any:
        try:
            return {**form(base), **form(over)}
        except ValueError:
            return over

    return merge


def _names(value: Any, default: dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(value, list):
        return {str(v): dict(default) if default is not None else None for v in value}
    return dict(value) if isinstance(value, dict) else {}


def _merge_depends_on(base: Any, over: Any, path: Path) -> Any:
    left = _names(base, DEPENDS_ON_DEFAULTS)
    right = _names(over, DEPENDS_ON_DEFAULTS)
    return _merge_maps(left, right, path)


def _merge_networks(base: Any, over: Any, path: Path) -> Any:
    return _merge_maps(_names(base, None), _names(over, None), path)


def _merge_logging(base: Any, over: Any, path: Path) -> Any:
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    if "driver" not in base or "driver" not in over or base["driver"] == over["driver"]:
        return _merge_maps(base, over, path)
    return over


def _to_sequence(base: Any, over: Any, _: Path) -> Any:
    """compose-go's mergeToSequence for lists of values: a string is a one-element list, and
    the override's entries are appended (unicity then drops repeats)."""

    def seq(value: Any) -> list[Any]:
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    return [*seq(base), *seq(over)]


def _merge_extra_hosts(base: Any, over: Any, _: Path) -> Any:
    def seq(value: Any) -> list[Any]:
        if isinstance(value, dict):
            return [
                f"{k}={v}" if not isinstance(v, list) else f"{k}={x}"
                for k, v in value.items()
                for x in (v if isinstance(v, list) else [v])
            ]
        return list(value) if isinstance(value, list) else [value]

    left = seq(base)
    return left + [v for v in seq(over) if v not in left]


def _merge_build(base: Any, over: Any, path: Path) -> Any:
    """``build`` in either form: a string is the context (``build: ./app`` over a long form
    keeps its args and dockerfile; a long form over ``build: .`` keeps that context)."""

    def long(value: Any) -> Any:
        return {"context": value} if isinstance(value, str) else value

    base, over = long(base), long(over)
    if isinstance(base, dict) and isinstance(over, dict):
        return _merge_maps(base, over, path)
    return over


_SPECIALS: list[tuple[Path, Callable[[Any, Any, Path], Any]]] = [
    (("services", "*", "build"), _merge_build),
    (("services", "*", "command"), _replace),
    (("services", "*", "entrypoint"), _replace),
    (("services", "*", "healthcheck", "test"), _replace),
    (("services", "*", "environment"), _by_key_map(normalise_environment)),
    (("services", "*", "labels"), _by_key_map(normalise_labels)),
    (("services", "*", "annotations"), _by_key_map(normalise_labels)),
    (("services", "*", "sysctls"), _by_key_map(normalise_environment)),
    (("services", "*", "deploy", "labels"), _by_key_map(normalise_labels)),
    (("services", "*", "build", "args"), _by_key_map(normalise_environment)),
    (("services", "*", "depends_on"), _merge_depends_on),
    (("services", "*", "networks"), _merge_networks),
    (("services", "*", "logging"), _merge_logging),
    (("services", "*", "extra_hosts"), _merge_extra_hosts),
    (("services", "*", "env_file"), _to_sequence),
    (("services", "*", "dns"), _to_sequence),
    (("services", "*", "dns_search"), _to_sequence),
    (("services", "*", "dns_opt"), _to_sequence),
    (("services", "*", "tmpfs"), _to_sequence),
    (("services", "*", "build", "labels"), _by_key_map(normalise_labels)),
    (("services", "*", "ulimits", "*"), _replace),
    (("networks", "*", "labels"), _by_key_map(normalise_labels)),
    (("volumes", "*", "labels"), _by_key_map(normalise_labels)),
]


def _merge(base: Any, over: Any, path: Path) -> Any:
    if isinstance(over, Override):
        return strip_tags(over.value)
    if over is None:
        return base
    for pattern, merger in _SPECIALS:
        if _matches(path, pattern):
            merged = merger(strip_tags(base), strip_tags(over), path)
            if isinstance(over, dict) and isinstance(merged, dict):
                # `FOO: !reset` inside an environment (or labels...) map removes FOO.
                for key in [k for k, v in over.items() if isinstance(v, Reset)]:
                    merged.pop(key, None)
            return merged
    if isinstance(base, dict) and isinstance(over, dict):
        return _merge_maps(base, over, path)
    if isinstance(base, list) and isinstance(over, list):
        return [*base, *strip_tags(over)]
    return strip_tags(over)


def _merge_maps(base: dict[str, Any], over: dict[str, Any], path: Path) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Reset):
            out.pop(key, None)
        elif key in out:
            out[key] = _merge(out[key], value, (*path, str(key)))
        else:
            out[key] = strip_tags(value)
    return out


# --- unicity -----------------------------------------------------------------------------


def _mount_target(entry: Any) -> str:
    if isinstance(entry, dict):
        return str(entry.get("target", ""))
    try:
        return str(parse_volume(str(entry))["target"])
    except FormError:
        return str(entry)


def _device_target(entry: Any) -> str:
    if isinstance(entry, dict):
        return str(entry.get("target", ""))
    parts = str(entry).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def _mount_ref(prefix: str) -> Callable[[Any], str]:
    def key(entry: Any) -> str:
        if isinstance(entry, dict):
            if "target" in entry:
                return str(entry["target"])
            return f"{prefix}/{entry.get('source')}"
        return f"{prefix}/{entry}"

    return key


def _port_key(entry: Any) -> str:
    """A port as Compose keys it while merging (:func:`written_port_key`)."""
    return written_port_key(entry)


def _value_key(entry: Any) -> str:
    return str(entry).partition("=")[0]


_UNIQUE: list[tuple[Path, Callable[[Any], str]]] = [
    (("services", "*", "volumes"), _mount_target),
    (("services", "*", "devices"), _device_target),
    (("services", "*", "configs"), _mount_ref("")),
    (("services", "*", "secrets"), _mount_ref("/run/secrets")),
    (("services", "*", "ports"), _port_key),
    (("services", "*", "expose"), str),
    (("services", "*", "profiles"), _value_key),
    (("services", "*", "cap_add"), _value_key),
    (("services", "*", "cap_drop"), _value_key),
    (("services", "*", "dns"), _value_key),
    (("services", "*", "dns_opt"), _value_key),
    (("services", "*", "dns_search"), _value_key),
    (("services", "*", "tmpfs"), _value_key),
    (("services", "*", "links"), _value_key),
    (("services", "*", "env_file"), lambda e: str(e.get("path") if isinstance(e, dict) else e)),
    (("services", "*", "build", "args"), _value_key),
    (("services", "*", "networks", "*", "aliases"), str),
    (
        ("networks", "*", "ipam", "config"),
        lambda c: str(c.get("subnet") if isinstance(c, dict) else c),
    ),
]


#: Each key on the way to a keyed list (``_UNIQUE``), by the path before it: only these
#: branches of a file can hold one, so :func:`enforce_file_unicity` walks no others.
_TOWARDS: dict[Path, frozenset[str]] = {}
for _pattern, _ in _UNIQUE:
    for _i in range(len(_pattern)):
        _TOWARDS[_pattern[:_i]] = _TOWARDS.get(_pattern[:_i], frozenset()) | {_pattern[_i]}


def enforce_file_unicity(data: Any) -> Any:
    """:func:`enforce_unicity` of a whole file, walking only the branches that can hold a
    keyed list; the other branches are the same objects as in ``data`` (a file's freshly
    read values, which nothing else holds)."""
    return _unique_towards(data, (), ())


def _unique_towards(node: Any, pattern: Path, path: Path) -> Any:
    towards = _TOWARDS.get(pattern)
    if towards is None:  # a keyed list's place
        return enforce_unicity(node, path)
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for k, v in node.items():
        if "*" in towards:
            out[k] = _unique_towards(v, (*pattern, "*"), (*path, str(k)))
        elif isinstance(k, str) and k in towards:
            out[k] = _unique_towards(v, (*pattern, k), (*path, k))
    return out


class UnicityError(FormError):
    """A keyed list's entry without its key (a long mount without a ``target``), at ``path``."""

    def __init__(self, message: str, *, path: tuple[str | int, ...], rule: str, fix: str) -> None:
        super().__init__(message, rule=rule, fix=fix)
        self.path = path


#: The keyed lists whose long entries Compose keys by a ``target`` it requires (a string).
_TARGETED = {("services", "*", "volumes"): "volume", ("services", "*", "devices"): "device"}


def _require_targets(node: list[Any], path: Path) -> None:
    for pattern, what in _TARGETED.items():
        if not _matches(path, pattern):
            continue
        for i, entry in enumerate(node):
            if isinstance(entry, dict) and not isinstance(entry.get("target"), str):
                dotted = ".".join(path)
                raise UnicityError(
                    f"service {what} {dotted}.[{i}] is missing a mount target",
                    path=(*path, i),
                    rule=f"a long-form {what} names its container path in target:",
                    fix=f"add target: /path/in/container to {dotted}[{i}]",
                )


def enforce_unicity(node: Any, path: Path) -> Any:
    """compose-go's EnforceUnicity: in keyed lists a later entry replaces an earlier one with
    the same key, in the earlier one's place.

    Raises:
        UnicityError: a long mount or device without a string ``target`` (Compose's indexer
            refuses it before anything is merged).
    """
    if isinstance(node, dict):
        return {k: enforce_unicity(v, (*path, str(k))) for k, v in node.items()}
    if isinstance(node, list):
        for pattern, key in _UNIQUE:
            if _matches(path, pattern):
                _require_targets(node, path)
                return unique_by(node, key)
    return node
