"""The flag catalog of one engine release: every command-line flag its server accepts.

A catalog is data, produced by :mod:`tierctl.catalog.build` from the engine's own source and
committed as JSON under ``tierctl/catalog/data/``. The JSON file is a boundary, so it is read
strictly: every key known (no extra one), every value of its field's type (:func:`_checked`,
a ``ValueError`` naming the field otherwise). The types are frozen dataclasses, not pydantic
models: ``validate`` loads a catalog for every engine service, and pydantic's import and model
building were a third of its start-up (issue #39).

These are the catalog's types only, a leaf: the engine profiles (:mod:`tierctl.engines`) and
compose's argv parser use them, and the catalog package (building, the shipped files) sits
above the profiles. What the data leaves open about the engine's parser is told by the
package that loads a catalog (:meth:`Catalog.with_parser`, from the engine's profile).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from tierctl.readers import read_text

FlagType = Literal["bool", "int", "float", "str", "json", "list"]
_FLAG_TYPES = get_args(FlagType)


#: The engine kinds, each with a profile under tierctl/engines/: filled by ``tierctl.engines``
#: from its ``PROFILES`` when it is imported (this leaf cannot import it), so no list of kinds
#: is written here. Tested in tests/unit/engines/test_profiles.py.
_ENGINE_KINDS: list[str] = []


def register_engine_kinds(kinds: Iterable[str]) -> None:
    """Record the engine kinds that have a profile (called by ``tierctl.engines``)."""
    _ENGINE_KINDS[:] = list(dict.fromkeys([*_ENGINE_KINDS, *kinds]))


def engine_kinds() -> tuple[str, ...]:
    """The engine kinds registered by the profiles, in their order."""
    return tuple(_ENGINE_KINDS)


def _known_engine(kind: str) -> str:
    if kind not in _ENGINE_KINDS:
        known = ", ".join(_ENGINE_KINDS) or "none registered (import tierctl.engines)"
        raise ValueError(f"unknown engine {kind!r}: one of {known}")
    return kind


#: An engine kind with a profile under tierctl/engines/ (checked where a catalog is made).
EngineKind = str


def _fail(where: str, what: str, value: Any) -> ValueError:
    return ValueError(f"{where}: {what}, not {json.dumps(value, default=repr)[:80]}")


def _checked(where: str, value: Any, kind: str) -> Any:
    """``value`` as field kind ``kind`` holds it (lists of strings as tuples), else a
    ``ValueError`` naming ``where``: str, bool, str?, bool?, strs, flagtype, flagtype?,
    nargs, choices, any."""
    optional = kind.endswith("?")
    if value is None and optional:
        return None
    base = kind.rstrip("?")
    if base == "str" and isinstance(value, str):
        return value
    if base == "bool" and isinstance(value, bool):
        return value
    if base == "strs" and isinstance(value, list | tuple):
        if all(isinstance(v, str) for v in value):
            return tuple(value)
        raise _fail(where, "a list of strings", value)
    if base == "flagtype" and value in _FLAG_TYPES:
        return value
    if base == "nargs" and isinstance(value, str | int) and not isinstance(value, bool):
        return value
    if base == "choices" and isinstance(value, list | tuple):
        return tuple(value)
    if base == "any":
        return value
    expected = {"flagtype": f"one of {', '.join(_FLAG_TYPES)}", "nargs": "a string or integer",
                "choices": "a list", "strs": "a list of strings"}.get(base, f"a {base}")  # fmt: skip
    raise _fail(where, expected + (" or null" if optional else ""), value)


def _is_strs(v: Any) -> bool:
    return type(v) is tuple and all(type(x) is str for x in v)


#: Kind -> whether a value is already that kind in its normal form (most are: this is the
#: fast path; the rest go through :func:`_checked`, which converts or refuses).
_NORMAL: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: type(v) is str,
    "str?": lambda v: v is None or type(v) is str,
    "bool": lambda v: type(v) is bool,
    "bool?": lambda v: v is None or type(v) is bool,
    "any": lambda v: True,
    "strs": _is_strs,
    "flagtype": lambda v: v in _FLAG_TYPES,
    "flagtype?": lambda v: v is None or v in _FLAG_TYPES,
    "nargs?": lambda v: v is None or type(v) is str or type(v) is int,
    "choices?": lambda v: v is None or type(v) is tuple,
}


def _check_fields(obj: Any, kinds: Mapping[str, str], where: str) -> None:
    """Check (and normalise: lists to tuples) a frozen dataclass's fields as constructed."""
    for name, kind in kinds.items():
        value = getattr(obj, name)
        if not _NORMAL[kind](value):
            object.__setattr__(obj, name, _checked(f"{where}.{name}", value, kind))


@functools.cache
def _init_fields(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    """(every init field, the required ones) of a dataclass."""
    known = [f for f in dataclasses.fields(cls) if f.init]
    required = tuple(
        f.name
        for f in known
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return frozenset(f.name for f in known), required


def _fields_of(cls: type, data: Any, where: str) -> dict[str, Any]:
    """``data`` as keyword arguments of ``cls``: a JSON object with no key ``cls`` lacks and
    every required one present."""
    if not isinstance(data, dict):
        raise _fail(where, "an object", data)
    known, required = _init_fields(cls)
    if not known.issuperset(data):
        extra = sorted(set(data) - known)
        raise ValueError(f"{where}: unknown key {extra[0]!r} (extra keys are refused)")
    missing = [n for n in required if n not in data]
    if missing:
        raise ValueError(f"{where}: {missing[0]!r} is required")
    return dict(data)


def _json_form(value: Any) -> Any:
    """A field's value as JSON holds it (tuples as lists, nested)."""
    if isinstance(value, tuple | list):
        return [_json_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_form(v) for k, v in value.items()}
    return value


#: Each Flag field's kind (:func:`_checked`).
_FLAG_KINDS = {"name": "str", "aliases": "strs", "negations": "strs", "dest": "str",
    "type": "flagtype", "element_type": "flagtype?", "parser": "str?",
    "default": "any", "choices": "choices?", "nargs": "nargs?", "action": "str?",
    "deprecated": "bool", "help": "str"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One command-line flag as the engine's argument parser registers it."""

    #: Primary spelling, with the leading dashes: --chunked-prefill-size.
    name: str
    #: Other spellings of the same flag.
    aliases: tuple[str, ...] = ()
    #: Spellings that set a boolean_optional flag false beyond its --no- forms (vLLM 0.33:
    #: --disable-x for --enable-x).
    negations: tuple[str, ...] = ()
    #: The attribute the parser stores the value under.
    dest: str
    #: Value type: bool flags take no value (or a --no- form).
    type: FlagType
    #: For list flags: the type of each element.
    element_type: FlagType | None = None
    #: Name of a custom value parser (e.g. human_readable_int accepts 16K).
    parser: str | None = None
    #: Default value; non-JSON values as their repr.
    default: Any = None
    #: Allowed values; None when open or computed at run time.
    choices: tuple[Any, ...] | None = None
    #: argparse nargs when set.
    nargs: str | int | None = None
    #: argparse action: store_true, store_false, boolean_optional, append, store_const or the
    #: name of a custom action class.
    action: str | None = None
    #: The engine marks the flag deprecated.
    deprecated: bool = False
    #: First sentence of the flag's help text.
    help: str = ""

    def __post_init__(self) -> None:
        _check_fields(
            self, _FLAG_KINDS, f"flag {self.name!r}" if isinstance(self.name, str) else "flag"
        )

    @classmethod
    def from_data(cls, data: Any, where: str = "flag") -> Flag:
        """A flag from its JSON object (strict: see the module)."""
        return cls(**_fields_of(cls, data, where))

    def to_data(self) -> dict[str, Any]:
        """The flag as its JSON object, in field order."""
        return {f.name: _json_form(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def spellings(self) -> tuple[str, ...]:
        """Every token that selects this flag, including a --no- form for optional booleans."""
        names = (self.name, *self.aliases)
        if self.action == "boolean_optional":
            names += tuple("--no-" + n[2:] for n in names if n.startswith("--"))
        return names + self.negations

    def takes_value(self) -> bool:
        """Whether the flag consumes at least one following token."""
        if self.type == "bool" and self.action in ("store_true", "store_false", "boolean_optional"):
            return False
        return not (self.action in ("store_const", "count") or self.nargs in (0, "?", "*"))


#: Each CatalogSource field's kind, and the Catalog's own scalar fields'.
_SOURCE_KINDS = {"distribution": "str", "wheel": "str", "sha256": "str", "files": "strs",
                 "layout": "str"}  # fmt: skip
_CATALOG_KINDS = {"engine": "str", "version": "str", "abbreviations": "bool",
                  "underscores": "bool?"}  # fmt: skip
#: A field kind as JSON Schema (:meth:`Catalog.json_schema`).
_KIND_SCHEMA: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "strs": {"type": "array", "items": {"type": "string"}},
    "flagtype": {"enum": list(_FLAG_TYPES)},
    "nargs": {"type": ["string", "integer"]},
    "choices": {"type": "array"},
    "any": {},
}


def _object_schema(kinds: Mapping[str, str], required: Iterable[str]) -> dict[str, Any]:
    properties = {}
    for name, kind in kinds.items():
        schema = dict(_KIND_SCHEMA[kind.rstrip("?")])
        properties[name] = {"anyOf": [schema, {"type": "null"}]} if kind.endswith("?") else schema
    return {"type": "object", "properties": properties, "required": sorted(required),
            "additionalProperties": False}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CatalogSource:
    """Where a catalog's data came from, so anyone can rebuild and compare it."""

    #: Package name on the index, e.g. sglang.
    distribution: str
    #: File name of the wheel the flags were read from.
    wheel: str
    #: SHA-256 of that wheel file.
    sha256: str
    #: Files inside the wheel that defined flags.
    files: tuple[str, ...]
    #: Which definition style the extractor found.
    layout: str

    def __post_init__(self) -> None:
        _check_fields(self, _SOURCE_KINDS, "source")

    def to_data(self) -> dict[str, Any]:
        """The source as its JSON object."""
        return {f.name: _json_form(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """All flags of one engine release, keyed by primary spelling, in registration order."""

    #: Engine kind (one with a profile: :func:`engine_kinds`).
    engine: EngineKind
    #: Engine release, e.g. 0.5.23.
    version: str
    #: Provenance of the data.
    source: CatalogSource
    #: Flags by primary spelling.
    flags: dict[str, Flag]
    #: The engine's parser accepts an unambiguous prefix of a long flag (argparse's
    #: allow_abbrev, on in SGLang and vLLM): --tp selects --tp-size.
    abbreviations: bool = True
    #: The parser reads --max_model_len as --max-model-len (vLLM's FlexibleArgumentParser).
    #: None: the engine profile's known behaviour.
    underscores: bool | None = None

    _by_spelling: dict[str, Flag] = field(init=False, repr=False, compare=False)
    # The engine parser's underscore mapping where ``underscores`` is None (see with_parser).
    _parser_underscores: bool = field(init=False, repr=False, compare=False, default=False)
    # Tokens that are not a spelling, resolved once each: the abbreviation scan walks every
    # spelling, and an argv may repeat one unknown flag 200,000 times (sweep seed 4411931).
    _resolved: dict[tuple[str, bool], tuple[Flag | None, str]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        """Check the fields, then index every spelling once: validation looks flags up per
        argv token."""
        _check_fields(self, _CATALOG_KINDS, "catalog")
        _known_engine(self.engine)
        if not isinstance(self.source, CatalogSource):
            raise _fail("catalog.source", "a CatalogSource", self.source)
        if not isinstance(self.flags, dict) or not all(
            isinstance(k, str) and isinstance(f, Flag) for k, f in self.flags.items()
        ):
            raise ValueError("catalog.flags: a mapping of spellings to flags")
        index: dict[str, Flag] = {}
        for flag in self.flags.values():
            for spelling in flag.spellings():
                index.setdefault(spelling, flag)
        object.__setattr__(self, "_by_spelling", index)
        object.__setattr__(self, "_resolved", {})

    @classmethod
    def from_data(cls, data: Any) -> Catalog:
        """A catalog from its JSON document (strict: see the module).

        Raises:
            ValueError: it is not a catalog (the first field that is not, named).
        """
        fields = _fields_of(cls, data, "catalog")
        fields["source"] = CatalogSource(**_fields_of(CatalogSource, fields["source"], "source"))
        flags = fields["flags"]
        if not isinstance(flags, dict):
            raise _fail("catalog.flags", "an object", flags)
        fields["flags"] = {k: Flag.from_data(v, f"flags.{k}") for k, v in flags.items()}
        return cls(**fields)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a catalog file (for the fuzzers and the docs; the loader checks
        the same rules itself)."""
        schema = _object_schema(_CATALOG_KINDS, ("engine", "version", "source", "flags"))
        schema["properties"]["engine"] = {"enum": list(engine_kinds())}
        schema["properties"]["source"] = _object_schema(_SOURCE_KINDS, _SOURCE_KINDS)
        flag = _object_schema(_FLAG_KINDS, ("name", "dest", "type"))
        schema["properties"]["flags"] = {"type": "object", "additionalProperties": flag}
        return schema

    @classmethod
    def from_json(cls, text: str) -> Catalog:
        """A catalog from its JSON text (:meth:`from_data`; bad JSON is a ``ValueError``)."""
        return cls.from_data(json.loads(text))

    def to_data(self) -> dict[str, Any]:
        """The catalog as its JSON document."""
        return {
            "engine": self.engine,
            "version": self.version,
            "source": self.source.to_data(),
            "flags": {k: f.to_data() for k, f in self.flags.items()},
            "abbreviations": self.abbreviations,
            "underscores": self.underscores,
        }

    def lookup(self, token: str) -> Flag | None:
        """The flag a command-line token selects, as the engine's parser would select it:
        any spelling; with underscores where the parser maps them to dashes; a unique prefix
        where the parser accepts abbreviations. None when it selects none (or several)."""
        found = self._by_spelling.get(token)
        if found is not None or not token.startswith("--"):
            return found
        return self.resolve(token)[0]

    def resolve(self, token: str) -> tuple[Flag | None, str]:
        """(flag, how): how a token that is not a spelling reaches a flag, for messages:
        "underscores", "abbreviation", "ambiguous: --a, --b" or "" when it reaches none."""
        index = self._by_spelling
        if token in index:
            return index[token], "spelling"
        underscores = self.underscores
        if underscores is None:
            underscores = self._parser_underscores
        memo = self._resolved
        key = (token, bool(underscores))
        if key not in memo:
            if len(memo) > 4096:
                memo.clear()
            memo[key] = self._resolve_new(token, bool(underscores))
        return memo[key]

    def _resolve_new(self, token: str, underscores: bool) -> tuple[Flag | None, str]:
        """:meth:`resolve` of a token that is not a spelling, uncached."""
        index = self._by_spelling
        if underscores and "." in token:
            # vLLM: --compilation-config.level 3 sets one key of a JSON-valued flag.
            base, _, _ = token.partition(".")
            found, _how = self.resolve(base)
            if found is not None and found.type == "json":
                return found, "json key"
        if underscores and "_" in token:
            dashed = "--" + token[2:].replace("_", "-")
            if dashed in index:
                return index[dashed], "underscores"
            token = dashed
        if not self.abbreviations or not token.startswith("--") or len(token) < 3:
            return None, ""
        hits = sorted(s for s in index if s.startswith(token) and s.startswith("--"))
        flags = {id(index[s]) for s in hits}
        if len(flags) == 1:
            return index[hits[0]], "abbreviation"
        if len(hits) > 1:
            return None, "ambiguous: " + ", ".join(hits[:6])
        return None, ""

    def with_parser(self, *, underscores: bool) -> Catalog:
        """This catalog told its engine parser's known behaviour (the engine profile's
        ``flag_underscores``), used where the data leaves it open; returns the catalog."""
        object.__setattr__(self, "_parser_underscores", underscores)
        return self

    def replace(self, **changes: Any) -> Catalog:
        """A copy with ``changes`` to its fields, told the same parser behaviour."""
        copy = dataclasses.replace(self, **changes)
        return copy.with_parser(underscores=self._parser_underscores)

    @property
    def parser_underscores(self) -> bool:
        """What :meth:`with_parser` was told (False until it is)."""
        return self._parser_underscores

    @property
    def ref(self) -> str:
        """``engine==version``, the way the CLI names a catalog."""
        return f"{self.engine}=={self.version}"

    def to_json(self) -> str:
        """Stable JSON text (sorted keys inside flags, flags in registration order)."""
        return json.dumps(self.to_data(), indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_path(cls, path: Path) -> Catalog:
        """Read a catalog JSON file (bounded, through :mod:`tierctl.readers`).

        Raises:
            InputError: the file cannot be read (a FIFO, a device, too large, not UTF-8).
            ValueError: it is not a catalog (the first field that is not, named).
        """
        return cls.from_json(read_text(path, what="flag catalog"))
