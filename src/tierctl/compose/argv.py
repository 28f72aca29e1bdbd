"""Reading an engine argv back into flags, the way the engine's parser would group tokens.

Used wherever a compose ``command`` is compared by flags: the contracts (with the pinned
engine's catalog, so a flag takes exactly its number of values) and the rollout planner and
gates (without one: a flag takes the tokens up to the next flag).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tierctl.engine_catalog import Catalog

#: A flag's value as read from an argv: ``True`` for a bare flag, a string, or a tuple of
#: several values.
FlagValue = str | bool | tuple[str, ...]


@dataclass(frozen=True)
class FlagUse:
    """One flag occurrence in an argv: the token, its values, and where it sits."""

    token: str  # as written, without any =value part: --prefill-decode-interval
    values: tuple[str, ...]
    index: int  # position of the flag token in the argv
    inline: bool = False  # written as --flag=value

    @property
    def name(self) -> str:
        """The flag without leading dashes, as the spec writes flag names."""
        return self.token.lstrip("-")


def split_launcher(argv: tuple[str, ...], launcher: list[str]) -> int:
    """Index of the first flag token: after the spec's launcher when the argv starts with it,
    otherwise at the first ``--`` token."""
    if list(argv[: len(launcher)]) == launcher:
        return len(launcher)
    return first_flag(argv)


def first_flag(argv: tuple[str, ...] | list[str]) -> int:
    """Index of the first ``--`` token: what comes before it is the launcher
    (``python3 -m sglang.launch_server``)."""
    for i, token in enumerate(argv):
        if token.startswith("--"):
            return i
    return len(argv)


def parse_flags(argv: tuple[str, ...], start: int, catalog: Catalog | None) -> list[FlagUse]:
    """Group the tokens from ``start`` into flags and their values.

    A known flag takes values per its catalog entry (none for store_true flags); an unknown
    one takes the tokens up to the next flag. A value starting with ``-`` followed by a digit
    (``-1``) is a value, as argparse treats negative numbers.
    """
    uses: list[FlagUse] = []
    # Stray positionals after uses[-1], attached to it at once when the next flag (or the
    # end) comes: one tuple per flag, not one per stray (200,000 values after a one-value
    # flag took 58 s, sweep seed 90210817 input 2803).
    strays: list[str] = []

    def attach() -> None:
        if strays:
            prev = uses[-1]
            uses[-1] = FlagUse(prev.token, (*prev.values, *strays), prev.index, prev.inline)
            strays.clear()

    i = start
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or _is_number(token):
            # A stray positional: attach it to the previous flag so it is reported there.
            if uses:
                strays.append(token)
            else:
                uses.append(FlagUse("", (token,), i))
            i += 1
            continue
        attach()
        if "=" in token and token.startswith("--"):
            name, _, value = token.partition("=")
            uses.append(FlagUse(name, (value,), i, inline=True))
            i += 1
            continue
        flag = catalog.lookup(token) if catalog is not None else None
        j = i + 1
        if flag is None or flag.takes_value() or flag.nargs in ("?", "*"):
            limit = 1 if flag is not None and flag.nargs in (None, "?") else len(argv)
            while j < len(argv) and j - i - 1 < limit and not _is_flag(argv[j]):
                j += 1
        uses.append(FlagUse(token, tuple(argv[i + 1 : j]), i))
        i = j
    attach()
    return uses


def flag_value(values: tuple[str, ...]) -> FlagValue:
    """One flag's value from its tokens: bare -> True, one token -> it, more -> the tuple."""
    return True if not values else values[0] if len(values) == 1 else values


def flag_map(uses: Iterable[FlagUse]) -> dict[str, FlagValue]:
    """Flags by name (no dashes) in argv order, each :func:`flag_value`; a repeated flag keeps
    its last value, as argparse does. A use without a flag name (a stray positional) is left
    out."""
    return {use.name: flag_value(use.values) for use in uses if use.name}


def flags_dict(uses: list[FlagUse]) -> dict[str, Any]:
    """Flags as the spec's effective-flags map: bare -> True, one value -> str, more -> list."""
    out: dict[str, Any] = {}
    for use in uses:
        if use.token:
            value = flag_value(use.values)
            out[use.name] = list(value) if isinstance(value, tuple) else value
    return out


def format_flag_value(value: FlagValue) -> str:
    """A flag value as it would be written on a command line (for messages)."""
    if value is True:
        return "(set)"
    if value is False:
        return "(unset)"
    if isinstance(value, tuple):
        return " ".join(value)
    return value


def _is_number(token: str) -> bool:
    if token.startswith("--"):
        return False  # float() never reads two signs; most tokens are flags
    try:
        float(token)
    except ValueError:
        return False
    return True


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not _is_number(token) and token != "-"
