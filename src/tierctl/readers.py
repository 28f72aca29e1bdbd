"""Bounded, located reading of every file tierctl is given: bytes, text, YAML, JSON and CSV.

Every input passes through here so that no file, however malformed or hostile, costs more than
a bounded amount of time and memory or ends in a traceback:

* :func:`read_bytes` refuses a path holding a NUL byte, a directory, a FIFO, a device
  (``/dev/zero``) or a socket, and reads at most :attr:`Limits.max_bytes` (a FIFO opened here
  never blocks: it is opened non-blocking and refused before any read);
* :func:`decode` turns bad bytes into a message naming the line and column of the first one;
* :func:`load_yaml` parses with libyaml and YAML 1.2 scalars (:mod:`tierctl.yaml12`), then walks
  the node graph once, iteratively, refusing a self-referencing anchor, a nesting deeper than
  :attr:`Limits.max_depth`, more than :attr:`Limits.max_nodes` nodes *after alias expansion*
  (a 1 KB alias bomb expands to billions), duplicate keys and ``!!binary``/``!!set`` values,
  and records the line of every key path (:class:`LineMap`);
* :func:`load_json` and :func:`json_line` bound depth and number length (Python refuses
  integers over 4,300 digits with a bare ``ValueError``; here it is a located message);
* :func:`csv_rows` bounds the field size and reports ``csv.Error`` with its line.

Inside :func:`read_once` (one command's reading: ``validate``, ``import``) a file is read from
disk once: telling what kind of file it is (``head``), loading it and re-reading it for the
project's whole reading all get the same bytes, bounded as before.

Every refusal is an :class:`~tierctl.errors.InputError` (exit 2) of the class the caller
chooses, naming ``file:line``, the limit, and the environment variable that raises it.
This module imports only the standard library, PyYAML and :mod:`tierctl.errors`, so every layer
(``compose``, ``spec``, ``bench``, ``rollout``, ``traces``) may use it.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import os
import stat
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tierctl.errors import InputError, Location
from tierctl.yaml12 import FastConstructor, OutOfBounds, Yaml12Loader

__all__ = [
    "CONFIG_LIMITS",
    "TRACE_LIMITS",
    "Limits",
    "LineMap",
    "PathKey",
    "YamlDoc",
    "csv_rows",
    "decode",
    "format_path",
    "json_line",
    "load_json",
    "load_yaml",
    "read_bytes",
    "read_once",
    "read_text",
    "yaml_line_map",
]

PathKey = tuple[str | int, ...]

_MIB = 1024 * 1024


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(
            f"{name} must be a positive integer",
            value=raw,
            fix=f"unset {name} or set it to a whole number",
        ) from None
    if value <= 0:
        raise InputError(f"{name} must be a positive integer", value=raw, fix=f"unset {name}")
    return value


@dataclass(frozen=True)
class Limits:
    """How much one input may hold; each limit is raised with the environment variable named.

    ``max_bytes`` (``TIERCTL_MAX_INPUT_MB`` for configuration, ``TIERCTL_MAX_TRACE_MB`` for
    traces), ``max_depth`` (``TIERCTL_MAX_DEPTH``), ``max_nodes`` (``TIERCTL_MAX_NODES``, counted
    after alias expansion), ``max_digits`` (``TIERCTL_MAX_DIGITS``, of one JSON number) and
    ``max_field_bytes`` (``TIERCTL_MAX_CSV_FIELD_KB``, one CSV field).
    """

    max_bytes: int = 16 * _MIB
    max_depth: int = 64
    max_nodes: int = 1_000_000
    max_digits: int = 400
    max_field_bytes: int = 1 * _MIB
    bytes_env: str = "TIERCTL_MAX_INPUT_MB"

    @classmethod
    def config(cls) -> Limits:
        """Limits for configuration files (specs, compose files, workloads, plans)."""
        return cls(
            max_bytes=_env_int("TIERCTL_MAX_INPUT_MB", 16) * _MIB,
            max_depth=_env_int("TIERCTL_MAX_DEPTH", 64),
            max_nodes=_env_int("TIERCTL_MAX_NODES", 1_000_000),
            max_digits=_env_int("TIERCTL_MAX_DIGITS", 400),
        )

    @classmethod
    def tokenizer(cls) -> Limits:
        """Limits for a Hugging Face ``tokenizer.json`` (tens of MiB for large vocabularies)."""
        return cls(
            max_bytes=_env_int("TIERCTL_MAX_TOKENIZER_MB", 256) * _MIB,
            bytes_env="TIERCTL_MAX_TOKENIZER_MB",
        )

    @classmethod
    def trace(cls) -> Limits:
        """Limits for request traces (large files, shallow rows)."""
        return cls(
            max_bytes=_env_int("TIERCTL_MAX_TRACE_MB", 2048) * _MIB,
            max_depth=_env_int("TIERCTL_MAX_DEPTH", 64),
            max_nodes=_env_int("TIERCTL_MAX_NODES", 1_000_000),
            max_digits=_env_int("TIERCTL_MAX_DIGITS", 400),
            max_field_bytes=_env_int("TIERCTL_MAX_CSV_FIELD_KB", 1024) * 1024,
            bytes_env="TIERCTL_MAX_TRACE_MB",
        )


#: The default limits, for documentation and tests (functions read the environment each call).
CONFIG_LIMITS = Limits()
TRACE_LIMITS = Limits(max_bytes=2048 * _MIB, bytes_env="TIERCTL_MAX_TRACE_MB")


# --------------------------------------------------------------------------- bytes and text


def _check_path(path: str | Path, what: str, error: type[InputError]) -> str:
    name = os.fspath(path)
    if "\x00" in name:
        raise error(
            f"the {what} path contains a NUL byte",
            location=Location(file=name.replace("\x00", "\\0")),
            rule="a path is text without NUL bytes",
            fix="pass the file's real path",
        )
    return name


def _open_regular(
    path: str | Path,
    what: str,
    lim: Limits,
    error: type[InputError],
    missing: str | None,
    missing_fix: str | None,
    *,
    any_size: bool = False,
) -> int:
    """A blocking descriptor on the regular file ``path`` no larger than ``lim.max_bytes``
    (unless ``any_size``); a FIFO is opened non-blocking and refused before any read."""
    name = _check_path(path, what, error)
    loc = Location(file=name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(
            missing or f"cannot read {what} file: no such file",
            location=loc,
            rule="file",
            fix=missing_fix or "check the path",
        ) from None
    except IsADirectoryError:
        raise error(
            f"the {what} path is a directory", location=loc, rule="file", fix="name a file"
        ) from None
    except OSError as exc:
        raise error(
            f"cannot read {what} file: {exc.strerror or exc}",
            location=loc,
            rule="file",
            fix="check the path and its permissions",
        ) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(
                f"the {what} path is a directory", location=loc, rule="file", fix="name a file"
            )
        if not stat.S_ISREG(st.st_mode):
            raise error(
                f"the {what} path is not a regular file (a FIFO, device or socket)",
                location=loc,
                rule="inputs are regular files, read whole and bounded",
                fix="copy the data to a regular file and pass that",
            )
        if not any_size and st.st_size > lim.max_bytes:
            raise _too_big(what, loc, lim, error)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(
    path: str | Path,
    *,
    what: str = "input",
    limits: Limits | None = None,
    error: type[InputError] = InputError,
    missing: str | None = None,
    missing_fix: str | None = None,
    head: int | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limits.max_bytes`` of them; with
    ``head``, only its first ``head`` bytes (to tell what kind of file it is), whatever its size.

    Raises:
        InputError (of class ``error``): a NUL in the path, a missing or unreadable file, a
            directory, a FIFO, device or socket, or a file over the size limit. ``missing``
            and ``missing_fix`` replace the message and fix for a file that does not exist.
    """
    lim = limits or Limits.config()
    cache = _ONCE[-1] if _ONCE else None
    key = os.path.abspath(_check_path(path, what, error)) if cache is not None else ""
    if cache is not None and key in cache:
        data = cache[key]
        if head is not None:
            return data[:head]
        if len(data) > lim.max_bytes:
            raise _too_big(what, Location(file=os.fspath(path)), lim, error)
        return data
    fd = _open_regular(path, what, lim, error, missing, missing_fix, any_size=head is not None)
    loc = Location(file=os.fspath(path))
    try:
        if head is not None and (cache is None or os.fstat(fd).st_size > lim.max_bytes):
            return os.read(fd, head)
        data = _read_all(fd, what, loc, lim, error)
    except OSError as exc:
        raise error(
            f"cannot read {what} file: {exc.strerror or exc}", location=loc, rule="file"
        ) from None
    finally:
        os.close(fd)
    if cache is not None:
        cache[key] = data
    return data[:head] if head is not None else data


def _read_all(fd: int, what: str, loc: Location, lim: Limits, error: type[InputError]) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_MIB, lim.max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > lim.max_bytes:
            raise _too_big(what, loc, lim, error)
    return b"".join(chunks)


#: The open :func:`read_once` scopes (innermost last): absolute path -> the bytes read.
_ONCE: list[dict[str, bytes]] = []


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Within this scope each file is read from disk once (by absolute path): every later
    :func:`read_bytes` / :func:`read_text` of it gets the same bytes, a ``head`` read a slice.
    For one command's inputs, which do not change while it runs; never around a writer or a
    long-running server."""
    _ONCE.append({})
    try:
        yield
    finally:
        _ONCE.pop()


def _too_big(what: str, loc: Location, lim: Limits, error: type[InputError]) -> InputError:
    mib = lim.max_bytes / _MIB
    return error(
        f"the {what} file is larger than the {mib:g} MiB limit",
        location=loc,
        rule=f"an input file holds at most {mib:g} MiB",
        fix=f"set {lim.bytes_env}=N (MiB) to raise the limit, or pass a smaller file",
    )


def decode(data: bytes, source: str, *, error: type[InputError] = InputError) -> str:
    """UTF-8 text of ``data`` (a leading BOM dropped); bad bytes named by line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start : exc.end]
        raise error(
            f"not UTF-8 text: byte 0x{bad[0]:02x} cannot be decoded",
            location=Location(file=source, line=line, column=column),
            rule="input files are UTF-8",
            fix="save the file as UTF-8 (e.g. `iconv -t UTF-8`)",
        ) from None
    return text.removeprefix("\ufeff")


def read_text(
    path: str | Path,
    *,
    what: str = "input",
    limits: Limits | None = None,
    error: type[InputError] = InputError,
    missing: str | None = None,
    missing_fix: str | None = None,
    lenient: bool = False,
) -> str:
    """:func:`read_bytes` then :func:`decode`; ``lenient`` replaces bad bytes instead (an
    engine's log, where a stray byte in one line must not hide the rest)."""
    data = read_bytes(
        path, what=what, limits=limits, error=error, missing=missing, missing_fix=missing_fix
    )
    if lenient:
        return data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    return decode(data, os.fspath(path), error=error)


def text_lines(
    path: str | Path,
    *,
    what: str = "input",
    limits: Limits | None = None,
    error: type[InputError] = InputError,
) -> Generator[str, None, None]:
    """The lines of the UTF-8 file ``path`` (line ends kept), read as they are consumed.

    The checks of :func:`read_bytes` (a regular file, at most ``limits.max_bytes``) run
    before the first line; a bad byte is named by line and column as :func:`decode` names it.
    Memory holds one line, not the file: a 400 MB trace took 2.2 GB read whole.

    Raises (while iterating):
        InputError (of class ``error``): as :func:`read_bytes` and :func:`decode`.
    """
    lim = limits or Limits.config()
    name = os.fspath(path)
    fd = _open_regular(path, what, lim, error, None, None)
    total = 0
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            for n, raw in enumerate(fh, start=1):
                total += len(raw)
                if total > lim.max_bytes:  # the file grew while it was read
                    raise _too_big(what, Location(file=name), lim, error)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise error(
                        f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded",
                        location=Location(file=name, line=n, column=exc.start + 1),
                        rule="input files are UTF-8",
                        fix="save the file as UTF-8 (e.g. `iconv -t UTF-8`)",
                    ) from None
                yield line.removeprefix("\ufeff") if n == 1 else line
    except OSError as exc:
        raise error(
            f"cannot read {what} file: {exc.strerror or exc}",
            location=Location(file=name),
            rule="file",
        ) from None
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- YAML


def format_path(path: PathKey) -> str:
    """``('replicas', 'r2', 'args', 'port')`` -> ``replicas.r2.args.port``; ints as ``[i]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class LineMap:
    """Line (1-based) of each key or item of a YAML document, by field path."""

    def __init__(self, lines: Mapping[PathKey, int] | None = None) -> None:
        self._lines: dict[PathKey, int] = dict(lines or {})

    def add(self, path: PathKey, line0: int) -> None:
        """Record that ``path`` starts at 0-based line ``line0`` (the first record wins)."""
        self._lines.setdefault(path, line0 + 1)

    def __contains__(self, path: object) -> bool:
        return path in self._lines

    def __len__(self) -> int:
        return len(self._lines)

    def items(self) -> Iterator[tuple[PathKey, int]]:
        """(path, 1-based line) pairs."""
        return iter(self._lines.items())

    def line(self, path: PathKey) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            found = self._lines.get(path[:end])
            if found is not None:
                return found
        return None


@dataclass
class YamlDoc:
    """A parsed YAML document: plain data and the line of every key path."""

    data: Any
    lines: LineMap = field(default_factory=LineMap)


_REFUSED_TAGS = {
    "tag:yaml.org,2002:binary": "!!binary",
    "tag:yaml.org,2002:set": "!!set",
    "tag:yaml.org,2002:omap": "!!omap",
    "tag:yaml.org,2002:pairs": "!!pairs",
    "tag:yaml.org,2002:timestamp": "!!timestamp",
}


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


#: Builds the error for a key given twice: (key, the second key's node, the first's 0-based line).
DuplicateError = Callable[[str, yaml.Node, int], InputError]
#: Builds the error for an anchor that holds its own alias: (the node met again).
RecursionError_ = Callable[[yaml.Node], InputError]


def _check_graph(
    root: yaml.Node,
    source: str,
    lim: Limits,
    error: type[InputError],
    duplicates: bool | DuplicateError,
    recursion: RecursionError_ | None = None,
) -> None:
    """One iterative pass over the node graph: cycles, depth, expanded size, keys, tags.

    Scalars (most of a document) are checked where their parent is expanded and never
    pushed: a scalar has size 1 and height 1 and cannot hold an alias.
    """
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, list[yaml.Node] | None]] = [(root, 1, None)]
    scalar = yaml.ScalarNode

    def where(node: yaml.Node) -> Location:
        return Location(file=source, line=node.start_mark.line + 1)

    def check_tag(node: yaml.Node) -> None:
        refused = _REFUSED_TAGS.get(node.tag)
        if refused:
            raise error(
                f"{refused} values are not allowed here",
                location=where(node),
                rule="inputs hold strings, numbers, booleans, lists and mappings",
                fix="write the value as a plain string",
            )

    if isinstance(root, scalar):
        check_tag(root)
        return
    while stack:
        node, depth, done = stack.pop()
        nid = id(node)
        if done is not None:
            on_path.discard(nid)
            size, height = 1, 0
            for k in done:
                if isinstance(k, scalar):
                    size += 1
                    height = max(height, 1)
                else:
                    size += sizes[id(k)]
                    height = max(height, heights[id(k)])
            sizes[nid] = size
            heights[nid] = 1 + height
            if size > lim.max_nodes:
                raise error(
                    f"the document expands to more than {lim.max_nodes:,} nodes"
                    " (aliases are counted each time they are used)",
                    location=where(node),
                    rule=f"a document holds at most {lim.max_nodes:,} nodes after alias expansion",
                    fix="remove the alias fan-out (an alias bomb?), or set TIERCTL_MAX_NODES=N"
                    " to raise the limit",
                )
            continue
        if nid in sizes:
            if depth - 1 + heights[nid] > lim.max_depth:
                raise _too_deep(where(node), lim, error)
            continue
        if nid in on_path:
            if recursion is not None:
                raise recursion(node)
            raise error(
                "an anchor refers to itself (a recursive alias)",
                location=where(node),
                rule="an alias may only name an anchor it is not inside",
                fix="copy the values instead of aliasing the enclosing anchor",
            )
        if depth > lim.max_depth:
            raise _too_deep(where(node), lim, error)
        check_tag(node)
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                if not isinstance(key_node, scalar):
                    # `? [a]: x` or `!reset []: x`: Compose says "invalid map key"; a tagged
                    # one built a hashable object that JSON output then failed on.
                    raise error(
                        "a mapping key is a sequence or a mapping (invalid map key)",
                        location=where(key_node),
                        rule="a mapping's keys are strings, numbers or booleans",
                        fix="write the key as a plain string",
                    )
        if duplicates and isinstance(node, yaml.MappingNode):
            _check_duplicates(node, source, error, duplicates)
        kids = _children(node)
        on_path.add(nid)
        stack.append((node, depth, kids))
        for k in kids:
            if isinstance(k, scalar):
                if depth + 1 > lim.max_depth:
                    raise _too_deep(where(k), lim, error)
                if k.tag in _REFUSED_TAGS:
                    check_tag(k)
            else:
                stack.append((k, depth + 1, None))


def _check_duplicates(
    node: yaml.MappingNode, source: str, error: type[InputError], duplicates: bool | DuplicateError
) -> None:
    """Refuse a key given twice in one mapping (merge keys aside)."""
    scalar = yaml.ScalarNode
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, scalar):
            continue
        key = str(key_node.value)
        if key == "<<":
            continue
        first = seen.get(key)
        if first is not None:
            if not isinstance(duplicates, bool):
                raise duplicates(key, key_node, first)
            raise error(
                f"duplicate key {key!r} (first given at line {first + 1})",
                location=Location(file=source, line=key_node.start_mark.line + 1),
                rule="duplicate-key",
                fix="give each key (each replica, flag, service) once",
            )
        seen[key] = key_node.start_mark.line


def _too_deep(loc: Location, lim: Limits, error: type[InputError]) -> InputError:
    return error(
        f"nested deeper than {lim.max_depth} levels",
        location=loc,
        rule=f"inputs nest at most {lim.max_depth} levels",
        fix="flatten the structure, or set TIERCTL_MAX_DEPTH=N to raise the limit",
    )


def _record_lines(root: yaml.Node, lines: LineMap, max_depth: int | None) -> None:
    """Line of every key/item path (through aliases; the graph is already bounded).

    Iterative, in document order, so the first occurrence of a path wins as in a recursive walk.
    """
    stack: list[tuple[yaml.Node, PathKey, int | None]] = [(root, (), None)]
    while stack:
        node, path, line0 = stack.pop()
        if line0 is not None:
            lines.add(path, line0)
        if max_depth is not None and len(path) >= max_depth:
            continue
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in reversed(node.value):
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((value_node, (*path, key), key_node.start_mark.line))
        elif isinstance(node, yaml.SequenceNode):
            for i in range(len(node.value) - 1, -1, -1):
                item = node.value[i]
                stack.append((item, (*path, i), item.start_mark.line))


_NOT_BUILT = object()


def _build_fused(parser: FastConstructor, node: yaml.Node, lim: Limits, duplicates: bool) -> Any:
    """The value from the fast loader's one checking walk, or ``_NOT_BUILT`` when it meets
    anything the reference path refuses (or cannot build)."""
    try:
        return parser.build_bounded(
            node,
            max_depth=lim.max_depth,
            max_nodes=lim.max_nodes,
            refused_tags=_REFUSED_TAGS,
            duplicates=duplicates,
        )
    except (OutOfBounds, yaml.YAMLError, ValueError, OverflowError, TypeError, RecursionError):
        return _NOT_BUILT


def _construct(parser: Any, node: yaml.Node, loader: type[Any], text: str) -> Any:
    """The checked document's value; PyYAML's own error when a value cannot be built.

    The fast constructor builds depth-first while PyYAML defers nested containers, so of two
    values that cannot be built they may name different ones: the text is read again with
    PyYAML's own order, for PyYAML's message.
    """
    try:
        return parser.construct_document(node)
    except (yaml.YAMLError, ValueError, OverflowError, TypeError):
        if not isinstance(parser, FastConstructor):
            raise
    again = loader(text)
    try:
        return again.construct_document_as_pyyaml(again.get_single_node())
    finally:
        again.dispose()


def load_yaml(
    text: str,
    source: str,
    *,
    error: type[InputError] = InputError,
    limits: Limits | None = None,
    duplicates: bool | DuplicateError = True,
    line_depth: int | None = None,
    loader: type[Any] = Yaml12Loader,
    recursion: RecursionError_ | None = None,
) -> YamlDoc:
    """Parse one YAML document (YAML 1.2 scalars), bounded; every problem located.

    Args:
        text: the YAML text.
        source: the file name used in messages.
        error: the :class:`~tierctl.errors.InputError` subclass raised.
        limits: default :meth:`Limits.config`.
        duplicates: refuse duplicate keys in a mapping (PyYAML keeps the last silently); a
            callable builds the error (a caller's own wording).
        line_depth: record lines only down to this many path parts (``None``: all).
        loader: a subclass of :class:`~tierctl.yaml12.Yaml12Loader` (extra tag constructors).
        recursion: builds the error for a recursive alias (a caller's own wording).

    Raises:
        InputError (of class ``error``): malformed YAML, a recursive alias, too deep, too many
            nodes after alias expansion, a duplicate key, or a refused tag.
    """
    lim = limits or Limits.config()
    if len(text) > lim.max_bytes:
        raise _too_big("YAML", Location(file=source), lim, error)
    lines = LineMap()
    parser = loader(text)
    # The cyclic GC is paused while the node graph and the data are built: they only grow (a
    # recursive alias is refused, so nothing here is garbage), and each collection re-walks
    # everything built so far, which made an 8 MB collector config superlinear.
    collecting = gc.isenabled()
    gc.disable()
    try:
        node = parser.get_single_node()
        if node is None:
            return YamlDoc(None, lines)
        if line_depth == 0 and isinstance(parser, FastConstructor):
            # No lines to record: check and build in one walk. Anything it refuses or cannot
            # build is read again below, the reference way, for the reference's message.
            data = _build_fused(parser, node, lim, bool(duplicates))
            if data is not _NOT_BUILT:
                return YamlDoc(data, lines)
            parser.dispose()
            parser = loader(text)
            node = parser.get_single_node()
        _check_graph(node, source, lim, error, duplicates, recursion)
        _record_lines(node, lines, line_depth)
        data = _construct(parser, node, loader, text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise error(
            "not valid YAML: " + (exc.problem or exc.context or "malformed").strip(),
            location=Location(file=source, line=mark.line + 1 if mark is not None else None),
            rule="yaml-syntax",
            fix="fix the YAML syntax at that line (indentation, quoting, colons)",
        ) from None
    except yaml.YAMLError as exc:
        raise error(
            f"malformed YAML: {exc}",
            location=Location(file=source),
            rule="yaml-syntax",
            fix="fix the YAML syntax",
        ) from None
    except (ValueError, OverflowError, TypeError) as exc:
        # A scalar the constructor cannot build (an out-of-range timestamp, an int over
        # Python's digit limit): PyYAML raises it bare.
        raise error(
            f"a value cannot be read: {exc}",
            location=Location(file=source),
            rule="yaml-syntax",
            fix="quote the value to keep it as a string",
        ) from None
    finally:
        parser.dispose()
        if collecting:
            gc.enable()
    return YamlDoc(data, lines)


def yaml_line_map(text: str, *, line_depth: int | None = None) -> LineMap:
    """The line map of a YAML text, or an empty one when the text cannot be read (bounded)."""
    try:
        return load_yaml(text, "<yaml>", duplicates=False, line_depth=line_depth).lines
    except InputError:
        return LineMap()


# --------------------------------------------------------------------------- JSON


def _depth_ok(value: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d > max_depth:
                return False
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


def _json(
    text: str, loc: Location, lim: Limits, error: type[InputError], constants: bool = False
) -> Any:
    def parse_int(s: str) -> int:
        if len(s.lstrip("-")) > lim.max_digits:
            raise _NumberTooLong(s)
        return int(s)

    def parse_float(s: str) -> float:
        if len(s) > lim.max_digits:
            raise _NumberTooLong(s)
        return float(s)

    def parse_constant(s: str) -> float:
        if constants:
            return float(s)
        raise _BadConstant(s)

    try:
        value = json.loads(
            text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
        )
    except json.JSONDecodeError as exc:
        line = (loc.line or 1) + exc.lineno - 1
        raise error(
            f"not JSON: {exc.msg}",
            location=Location(file=loc.file, line=line, column=exc.colno, path=loc.path),
            rule="json-syntax",
            fix="fix the JSON at that position",
        ) from None
    except _NumberTooLong as exc:
        raise error(
            f"a number has more than {lim.max_digits} digits",
            location=loc,
            rule=f"JSON numbers have at most {lim.max_digits} digits",
            value=f"{exc.args[0][:20]}... ({len(exc.args[0])} characters)",
            fix="fix the number, or set TIERCTL_MAX_DIGITS=N to raise the limit",
        ) from None
    except _BadConstant as exc:
        raise error(
            f"{exc.args[0]} is not a JSON number",
            location=loc,
            rule="JSON numbers are finite",
            fix="write a finite number",
        ) from None
    except RecursionError:
        raise _too_deep(loc, lim, error) from None
    if not _depth_ok(value, lim.max_depth):
        raise _too_deep(loc, lim, error)
    return value


class _NumberTooLong(ValueError):
    pass


class _BadConstant(ValueError):
    pass


def load_json(
    text: str,
    source: str,
    *,
    error: type[InputError] = InputError,
    limits: Limits | None = None,
    constants: bool = False,
) -> Any:
    """Parse a JSON document, bounded in depth and number length; errors at file:line:col.

    ``NaN`` and ``Infinity`` are refused (they are not JSON), unless ``constants``: the files
    tierctl writes itself (bench results, cost models) carry NaN where a figure is undefined,
    as Python's ``json`` writes it.
    """
    lim = limits or Limits.config()
    return _json(text, Location(file=source), lim, error, constants)


def json_line(
    line: str,
    source: str,
    lineno: int,
    *,
    error: type[InputError] = InputError,
    limits: Limits | None = None,
) -> Any:
    """Parse one line of a JSON-lines file (as :func:`load_json`, located at ``lineno``)."""
    lim = limits or Limits.trace()
    return _json(line, Location(file=source, line=lineno), lim, error)


# --------------------------------------------------------------------------- CSV


def csv_rows(
    text: str | Iterable[str],
    source: str,
    *,
    error: type[InputError] = InputError,
    limits: Limits | None = None,
) -> tuple[list[str], Iterator[tuple[int, dict[str, str | None]]]]:
    """The header of a CSV text (or its lines, e.g. :func:`text_lines`) and an iterator of
    (line, row) with bounded field size.

    Raises (while iterating too):
        InputError (of class ``error``): a field over the limit, or malformed CSV, at its line.
    """
    lim = limits or Limits.trace()
    csv.field_size_limit(lim.max_field_bytes)
    reader = csv.DictReader(io.StringIO(text, newline="") if isinstance(text, str) else text)

    def fail(exc: csv.Error) -> InputError:
        msg = str(exc)
        fix = "fix the CSV quoting at that line"
        if "field larger than field limit" in msg:
            msg = f"a CSV field is larger than {lim.max_field_bytes:,} bytes"
            fix = "fix the row, or set TIERCTL_MAX_CSV_FIELD_KB=N to raise the limit"
        return error(
            f"malformed CSV: {msg}",
            location=Location(file=source, line=reader.line_num + 1),
            rule="csv",
            fix=fix,
        )

    try:
        header = list(reader.fieldnames or [])
    except csv.Error as exc:
        raise fail(exc) from None

    def rows() -> Iterator[tuple[int, dict[str, str | None]]]:
        while True:
            try:
                rec = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise fail(exc) from None
            yield reader.line_num, rec

    return header, rows()
