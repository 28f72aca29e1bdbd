"""The catalogs shipped with tierctl (package data) and lookups across releases."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from tierctl.catalog.refs import parse_ref, with_profile
from tierctl.engine_catalog import Catalog, Flag
from tierctl.engines import kinds
from tierctl.engines.base import image_reference
from tierctl.errors import InputError

# ENGINE-VERSION.json; ENGINE is a kind of the engine registry (checked where files are listed).
_FILE = re.compile(r"^(?P<engine>[a-z][a-z0-9_]*)-(?P<version>[0-9].*)\.json$")
#: The shape of a release string a catalog file may be named after: a version, never a path
#: part, and short enough to be a file name (a 700-character "version" was an OSError).
RELEASE = re.compile(r"^[0-9][0-9A-Za-z.+-]{0,63}$")
_ENGINE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Order release strings numerically part by part (0.5.9 < 0.5.16 < 0.5.23)."""
    return tuple(
        (int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"[.+-]", version)
    )


def data_dir() -> Path:
    """The folder of committed catalog JSON files (beside this module: importlib.resources
    would import tempfile, shutil and lzma for it, a few ms of every validate's start)."""
    return Path(__file__).parent / "data"


@functools.cache
def shipped() -> tuple[tuple[str, str], ...]:
    """(engine, version) of every shipped catalog, sorted by engine then version."""
    found = []
    for path in data_dir().glob("*.json"):
        match = _FILE.match(path.name)
        if match and match["engine"] in kinds():
            found.append((match["engine"], match["version"]))
    return tuple(sorted(found, key=lambda ev: (ev[0], version_key(ev[1]))))


@functools.cache
def load_catalog(engine: str, version: str) -> Catalog:
    """A shipped catalog, read once per process.

    Raises:
        InputError: not a release string, or no catalog for that release (lists the shipped
            ones and how to build one).
    """
    if not _ENGINE.match(engine) or not RELEASE.match(version) or ".." in version:
        shown = version if len(version) <= 40 else f"{version[:30]}... ({len(version)} chars)"
        raise InputError(
            f"{shown!r} is not an engine release of {engine[:40]!r}",
            rule="a release is a version string: a digit, then at most 63 of [0-9A-Za-z.+-]",
            value=shown,
            fix="pin a release such as 0.5.23 (see `tierctl catalog list`)",
        )
    path = data_dir() / f"{engine}-{version}.json"
    if not path.is_file():
        have = ", ".join(f"{e}=={v}" for e, v in shipped() if e == engine) or "none"
        raise InputError(
            f"no flag catalog for {engine}=={version} (shipped: {have})",
            fix=f"build it (`tierctl catalog build {engine}=={version}`, or `build_catalog`) "
            f"into {path.name} and pass that file, or pin a shipped release",
        )
    return with_profile(Catalog.from_path(path))


def resolve_catalog(ref_or_path: str) -> Catalog:
    """A catalog named ``engine==version`` (shipped) or a path to a catalog JSON file."""
    if "==" in ref_or_path:
        engine, version = parse_ref(ref_or_path)
        return load_catalog(engine, version)
    path = Path(ref_or_path)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # a name too long for a path, a NUL: not a file either
        is_file = False
    if not is_file:
        raise InputError(f"{ref_or_path[:200]}: neither ENGINE==VERSION nor a catalog file")
    try:
        return with_profile(Catalog.from_path(path))
    except ValueError as exc:
        raise InputError(f"{path}: not a tierctl catalog: {exc}") from exc


@dataclass(frozen=True)
class FlagHistory:
    """Where else a flag unknown to one release appears among the shipped catalogs."""

    added_in: str | None  # first later release that has it
    last_seen: str | None  # last earlier release that had it (when it was removed)


def flag_history(engine: str, version: str, token: str) -> FlagHistory:
    """For a flag missing from ``engine==version``: the later release that adds it, or the
    earlier release that last had it."""
    pinned = version_key(version)
    added_in = last_seen = None
    for other_engine, other in shipped():
        if other_engine != engine or other == version:
            continue
        if load_catalog(engine, other).lookup(token) is None:
            continue
        if version_key(other) > pinned and added_in is None:
            added_in = other
        elif version_key(other) < pinned:
            last_seen = other
    return FlagHistory(added_in=added_in, last_seen=last_seen)


@dataclass(frozen=True)
class CatalogFlagChange:
    """One flag that differs between two catalogs."""

    name: str
    field: str
    before: object
    after: object


@dataclass(frozen=True)
class CatalogDiff:
    """Flags added, removed and changed from catalog ``a`` to catalog ``b``."""

    a: str
    b: str
    added: tuple[Flag, ...]
    removed: tuple[Flag, ...]
    changed: tuple[CatalogFlagChange, ...]


_COMPARED = ("type", "default", "choices", "nargs", "action", "deprecated", "aliases")


def diff_catalogs(a: Catalog, b: Catalog) -> CatalogDiff:
    """What changed in the flag surface from ``a`` to ``b``."""
    added = tuple(f for n, f in b.flags.items() if n not in a.flags)
    removed = tuple(f for n, f in a.flags.items() if n not in b.flags)
    changed: list[CatalogFlagChange] = []
    for name, before in a.flags.items():
        after = b.flags.get(name)
        if after is None:
            continue
        for attr in _COMPARED:
            old, new = getattr(before, attr), getattr(after, attr)
            if old != new:
                changed.append(CatalogFlagChange(name, attr, old, new))
    return CatalogDiff(a.ref, b.ref, added, removed, tuple(changed))


def did_you_mean(catalog: Catalog, token: str) -> str:
    """The fix for a flag ``catalog`` lacks: its closest spellings, or how to find one."""
    spellings = [s for f in catalog.flags.values() for s in f.spellings() if s.startswith("--")]
    close = difflib.get_close_matches(token, spellings, n=3, cutoff=0.75)
    if close:
        return f"did you mean {' or '.join(close)}? (see `tierctl catalog show {catalog.ref}`)"
    return f"drop the flag, or pin a release that has it (`tierctl catalog show {catalog.ref}`)"


def unknown_flag(engine: str, version: str, token: str) -> str:
    """Why ``token`` is not a flag of ``engine`` ``version``: a later release adds it, an
    earlier one had it, or no catalogued release knows it (one wording for every caller)."""
    history = flag_history(engine, version, token)
    if history.added_in:
        return (
            f"{token} is not a flag of {engine} {version}: added in {history.added_in}; "
            "pin that release or drop the flag"
        )
    if history.last_seen:
        return f"{token} is not a flag of {engine} {version}: removed (last in {history.last_seen})"
    return f"{token} is not a flag of {engine} {version} (nor of any catalogued release)"


def newest_shipped(engine: str) -> str | None:
    """The newest release of ``engine`` with a shipped catalog, or None."""
    versions = [v for e, v in shipped() if e == engine]
    return versions[-1] if versions else None


def catalog_for_image(
    engine: str, version: str | None, image: str | None
) -> tuple[Catalog | None, str | None]:
    """The catalog to check an engine service's flags against, from its image tag, and a note
    when it is not the tag's own: a tag that names no shipped release (``latest``, ``main``,
    ``${IMG:-repo:v0.4.9}``, an unreleased or unshipped version) is checked against the newest
    shipped release of that engine, and the note says which (validate and import both say
    it). ``(None, None)`` only where no catalog of the engine is shipped at all."""
    if version is not None and (engine, version) in shipped():
        return load_catalog(engine, version), None
    newest = newest_shipped(engine)
    if newest is None:
        return None, None
    ref = image_reference(image) or ""
    tag = ref.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
    if version is not None:
        why = f"no shipped catalog for {engine} {version} (tag {tag or '(none)'!r})"
    elif tag:
        why = f"tag {tag!r} is not pinned to a release"
    elif "@" in ref:
        # A digest says which bytes run, not which release they are.
        why = "the image is pinned by digest only, which names no release"
    else:
        why = "the image names no release"
    return load_catalog(engine, newest), (
        f"flags checked against {engine} {newest}, the newest shipped catalog; {why}"
    )
