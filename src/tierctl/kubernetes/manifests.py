"""Reading Kubernetes manifests: files, directories, or a Helm/Kustomize output on stdin.

A manifest file holds any number of YAML documents separated by ``---``; ``kind: List``
documents hold their objects under ``items``. Every object keeps the line of each of its keys,
in the file it came from, so every finding can say ``file:line``. Reading is bounded like every
other input (:mod:`tierctl.readers`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.readers import LineMap, PathKey, format_path, load_yaml, read_text

_SEPARATOR = re.compile(r"^---(?:[ \t]|$)")
#: A kind as Kubernetes names one (CamelCase letters and digits; a kind's plural is a DNS
#: label, so 63 characters is already generous) and an apiVersion (a DNS-subdomain group, then
#: a version): a longer or stranger one can be no object's, and naming a schema file with it
#: ran into the file system ("File name too long" for a 300-character kind).
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_API_VERSION = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?/)?[a-z0-9]{1,63}")
_END = re.compile(r"^\.\.\.[ \t]*$")
#: File names a directory is read for (sorted, recursively).
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Manifest:
    """One Kubernetes object and where it sits."""

    source: str
    data: dict[str, Any]
    lines: LineMap
    #: Path of the object inside its document (``("items", 3)`` in a List, else ``()``).
    prefix: PathKey = ()
    #: The lines of the file it came from, to locate words inside a multi-line string (a
    #: flag inside a ``|`` block script sits on its own line, not the block's first).
    source_lines: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def kind(self) -> str:
        """The object's ``kind`` ("" when missing)."""
        return str(self.data.get("kind") or "")

    @property
    def api_version(self) -> str:
        """The object's ``apiVersion`` ("" when missing)."""
        return str(self.data.get("apiVersion") or "")

    @property
    def group(self) -> str:
        """The API group (``apps``, ``leaderworkerset.x-k8s.io``; "" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def name(self) -> str:
        """``metadata.name`` ("" when missing)."""
        meta = self.data.get("metadata")
        return str(meta.get("name") or "") if isinstance(meta, dict) else ""

    @property
    def ref(self) -> str:
        """``Kind/name`` for messages."""
        return f"{self.kind or '?'}/{self.name or '?'}"

    def location(self, *path: str | int) -> Location:
        """File, line and field path of ``path`` inside this object (or its nearest parent)."""
        return Location(
            file=self.source,
            line=self.lines.line((*self.prefix, *path)),
            path=format_path(tuple(path)),
        )


def split_documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line index, text) of each YAML document, separated by ``---`` lines.

    The separator line itself is blanked, not removed, so the document's own line numbers
    stay those of the file.
    """
    lines = text.splitlines(keepends=True)
    start = 0
    for i, line in enumerate(lines):
        if _SEPARATOR.match(line) or _END.match(line):
            if i > start:
                yield start, "".join(lines[start:i])
            start = i + 1
    if start < len(lines):
        yield start, "".join(lines[start:])


def parse_manifests(text: str, source: str) -> list[Manifest]:
    """Every object of a multi-document YAML (or JSON) text, located.

    Raises:
        InputError: a document is not YAML, or is not a mapping (an object) or empty.
    """
    out: list[Manifest] = []
    source_lines = tuple(text.splitlines())
    for first, body in split_documents(text):
        try:
            doc = load_yaml(body, source, line_depth=None)
        except InputError as exc:
            if exc.location is not None and exc.location.line is not None:
                exc.location.line += first  # the document's line -> the file's
            raise
        # The document's own lines -> the file's (parsing it alone keeps a long stream linear).
        lines = LineMap({path: line + first for path, line in doc.lines.items()})
        data = doc.data
        if data is None:
            continue
        if not isinstance(data, dict):
            raise InputError(
                f"a document is a {type(data).__name__}, not a Kubernetes object",
                location=Location(file=source, line=first + 1),
                rule="each YAML document of a manifest is one object (apiVersion, kind, ...)",
                fix="separate objects with --- lines, or wrap a list in kind: List",
            )
        _check_names(data, source, lines, ())
        items = data.get("items")
        if str(data.get("kind", "")).endswith("List") and isinstance(items, list):
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    _check_names(item, source, lines, ("items", i))
                    out.append(Manifest(source, item, lines, ("items", i), source_lines))
            continue
        out.append(Manifest(source, data, lines, (), source_lines))
    return out


def _check_names(data: dict[str, Any], source: str, lines: LineMap, at: PathKey) -> None:
    """Refuse a ``kind`` or ``apiVersion`` no Kubernetes object can have (located)."""
    for key, pattern, rule, fix in (
        ("kind", _KIND, "a kind is CamelCase letters and digits, at most 63", "Deployment"),
        (
            "apiVersion",
            _API_VERSION,
            "an apiVersion is GROUP/VERSION or VERSION (lower-case DNS names)",
            "apps/v1",
        ),
    ):
        value = data.get(key)
        if value is None or (isinstance(value, str) and pattern.fullmatch(value)):
            continue
        shown = str(value)
        raise InputError(
            f"{key} {shown[:40]!r}{'...' if len(shown) > 40 else ''} names no Kubernetes "
            f"object ({len(shown)} characters)",
            location=Location(
                file=source, line=lines.line((*at, key)), path=format_path((*at, key))
            ),
            rule=rule,
            fix=f"write the object's {key}, e.g. {key}: {fix}",
        )


def manifest_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files ``paths`` name: a file as given, a directory's manifests sorted."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(
                f for f in p.rglob("*") if f.suffix in MANIFEST_SUFFIXES and f.is_file()
            )
        else:
            files.append(p)
    return files


def read_manifests(paths: Sequence[str | Path], stdin: str | None = None) -> list[Manifest]:
    """Every object in ``paths`` (``-`` is ``stdin``'s text, e.g. ``helm template`` output).

    Raises:
        InputError: a path is missing or unreadable, or holds no object; ``-`` without text.
    """
    out: list[Manifest] = []
    for p in paths:
        if str(p) == "-":
            if stdin is None:
                raise InputError(
                    "- names standard input, which was not given",
                    rule="usage",
                    fix="pipe the manifests in: helm template ... | tierctl validate -",
                )
            out += parse_manifests(stdin, "<stdin>")
            continue
        files = manifest_files([p])
        if not files:
            raise InputError(
                f"{p}: no manifest files (*.yaml, *.yml, *.json) in the directory",
                location=Location(file=str(p)),
                rule="a directory is read for its manifest files",
                fix="point at the folder holding the manifests",
            )
        for f in files:
            out += parse_manifests(read_text(f, what="manifest"), str(f))
    return out
