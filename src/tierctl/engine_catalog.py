"""The flag catalog of one engine release: every command-line flag its server accepts.

A catalog is data, produced by :mod:`tierctl.catalog.build` from the engine's own source and
committed as JSON under ``tierctl/catalog/data/``. The JSON file is a boundary, so it is read
through pydantic models with ``extra="forbid"``.

These are the catalog's types only, a leaf: the engine profiles (:mod:`tierctl.engines`) and
compose's argv parser use them, and the catalog package (building, the shipped files) sits
above the profiles. What the data leaves open about the engine's parser is told by the
package that loads a catalog (:meth:`Catalog.with_parser`, from the engine's profile).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from tierctl.readers import read_text

FlagType = Literal["bool", "int", "float", "str", "json", "list"]


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


#: An engine kind with a profile under tierctl/engines/.
EngineKind = Annotated[str, AfterValidator(_known_engine)]


class Flag(BaseModel):
    """One command-line flag as the engine's argument parser registers it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        description="Primary spelling, with the leading dashes: --chunked-prefill-size."
    )
    aliases: tuple[str, ...] = Field(default=(), description="Other spellings of the same flag.")
    negations: tuple[str, ...] = Field(
        default=(),
        description="Spellings that set a boolean_optional flag false beyond its --no- forms "
        "(vLLM 0.33: --disable-x for --enable-x).",
    )
    dest: str = Field(description="The attribute the parser stores the value under.")
    type: FlagType = Field(description="Value type: bool flags take no value (or a --no- form).")
    element_type: FlagType | None = Field(
        default=None, description="For list flags: the type of each element."
    )
    parser: str | None = Field(
        default=None,
        description="Name of a custom value parser (e.g. human_readable_int accepts 16K).",
    )
    default: Any = Field(default=None, description="Default value; non-JSON values as their repr.")
    choices: tuple[Any, ...] | None = Field(
        default=None, description="Allowed values; None when open or computed at run time."
    )
    nargs: str | int | None = Field(default=None, description="argparse nargs when set.")
    action: str | None = Field(
        default=None,
        description="argparse action: store_true, store_false, boolean_optional, append, "
        "store_const or the name of a custom action class.",
    )
    deprecated: bool = Field(default=False, description="The engine marks the flag deprecated.")
    help: str = Field(default="", description="First sentence of the flag's help text.")

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


class CatalogSource(BaseModel):
    """Where a catalog's data came from, so anyone can rebuild and compare it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distribution: str = Field(description="Package name on the index, e.g. sglang.")
    wheel: str = Field(description="File name of the wheel the flags were read from.")
    sha256: str = Field(description="SHA-256 of that wheel file.")
    files: tuple[str, ...] = Field(description="Files inside the wheel that defined flags.")
    layout: str = Field(description="Which definition style the extractor found.")


class Catalog(BaseModel):
    """All flags of one engine release, keyed by primary spelling, in registration order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: EngineKind = Field(description="Engine kind.")
    version: str = Field(description="Engine release, e.g. 0.5.23.")
    source: CatalogSource = Field(description="Provenance of the data.")
    flags: dict[str, Flag] = Field(description="Flags by primary spelling.")
    abbreviations: bool = Field(
        default=True,
        description=(
            "The engine's parser accepts an unambiguous prefix of a long flag (argparse's "
            "allow_abbrev, on in SGLang and vLLM): --tp selects --tp-size."
        ),
    )
    underscores: bool | None = Field(
        default=None,
        description=(
            "The parser reads --max_model_len as --max-model-len (vLLM's "
            "FlexibleArgumentParser). None: the engine profile's known behaviour."
        ),
    )

    _by_spelling: dict[str, Flag] = PrivateAttr(default_factory=dict)
    # The engine parser's underscore mapping where ``underscores`` is None (see with_parser).
    _parser_underscores: bool = PrivateAttr(default=False)
    # Tokens that are not a spelling, resolved once each: the abbreviation scan walks every
    # spelling, and an argv may repeat one unknown flag 200,000 times (sweep seed 4411931).
    _resolved: dict[tuple[str, bool], tuple[Flag | None, str]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        """Index every spelling once: validation looks flags up per argv token."""
        for flag in self.flags.values():
            for spelling in flag.spellings():
                self._by_spelling.setdefault(spelling, flag)

    def lookup(self, token: str) -> Flag | None:
        """The flag a command-line token selects, as the engine's parser would select it:
        any spelling; with underscores where the parser maps them to dashes; a unique prefix
        where the parser accepts abbreviations. None when it selects none (or several)."""
        # Read the private dict directly: pydantic routes `self._x` through __getattr__,
        # which is slow enough to matter when a fleet's argv tokens are looked up.
        index: dict[str, Flag] = self.__pydantic_private__["_by_spelling"]  # type: ignore[index]
        found = index.get(token)
        if found is not None or not token.startswith("--"):
            return found
        return self.resolve(token)[0]

    def resolve(self, token: str) -> tuple[Flag | None, str]:
        """(flag, how): how a token that is not a spelling reaches a flag, for messages:
        "underscores", "abbreviation", "ambiguous: --a, --b" or "" when it reaches none."""
        private = self.__pydantic_private__
        index: dict[str, Flag] = private["_by_spelling"]  # type: ignore[index]
        if token in index:
            return index[token], "spelling"
        underscores = self.underscores
        if underscores is None:
            underscores = private["_parser_underscores"]  # type: ignore[index]
        memo: dict[tuple[str, bool], tuple[Flag | None, str]] = private["_resolved"]  # type: ignore[index]
        key = (token, bool(underscores))
        if key not in memo:
            if len(memo) > 4096:
                memo.clear()
            memo[key] = self._resolve_new(token, bool(underscores))
        return memo[key]

    def _resolve_new(self, token: str, underscores: bool) -> tuple[Flag | None, str]:
        """:meth:`resolve` of a token that is not a spelling, uncached."""
        index: dict[str, Flag] = self.__pydantic_private__["_by_spelling"]  # type: ignore[index]
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
        self.__pydantic_private__["_parser_underscores"] = underscores  # type: ignore[index]
        return self

    @property
    def ref(self) -> str:
        """``engine==version``, the way the CLI names a catalog."""
        return f"{self.engine}=={self.version}"

    def to_json(self) -> str:
        """Stable JSON text (sorted keys inside flags, flags in registration order)."""
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_path(cls, path: Path) -> Catalog:
        """Read a catalog JSON file (bounded, through :mod:`tierctl.readers`).

        Raises:
            InputError: the file cannot be read (a FIFO, a device, too large, not UTF-8).
            ValueError: it is not a catalog (pydantic's validation error).
        """
        return cls.model_validate_json(read_text(path, what="flag catalog"))
