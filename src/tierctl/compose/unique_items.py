"""The compose-spec schema's ``uniqueItems`` on ports, as Compose v2 enforces it.

Compose validates the project against the schema after each file is merged (and its keyed
lists made unique), before that file's values are turned into their long forms. Unicity has
already removed the ports with the same key, so the schema's ``uniqueItems`` refuses only two
ports whose keys differ but which its JSON validator (santhosh-tekuri/jsonschema v6) calls
equal. That validator compares a later item with an earlier one, and a number in the later item
equals a string in the earlier one that reads as the same number (its ``equals`` is not
symmetric): ``{target: 80, published: "8000"}`` then ``{target: 80, published: 8000}`` is
refused ("items at 0 and 1 are equal"), the other order is read as two ports. Lists of more
than 20 items are compared through a hash that keeps strings and numbers apart.

Only ports can meet this: the other ``uniqueItems`` lists hold strings, or (volumes) are keyed by
a string target that two equal items share, so unicity has already kept one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from tierctl.compose.casts import go_int
from tierctl.compose.forms import FormError
from tierctl.compose.long_forms import parse_port, unique_by, written_port_key
from tierctl.compose.tags import Override, Reset

#: What Go's big.Rat.SetString reads from a decimal number's text (no spaces, no underscores).
_RAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?\d+/\d+")
#: Up to this many items, every pair is compared; above it, items are grouped by a hash.
_PAIRWISE_MAX = 20


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rational(value: Any) -> Fraction | None:
    """The number a value's Go text (``fmt.Sprint``) reads as, or None."""
    if _number(value):
        try:
            return Fraction(value)
        except (ValueError, OverflowError):  # inf, nan
            return None
    if isinstance(value, str) and _RAT.fullmatch(value):
        try:
            return Fraction(value)
        except (ValueError, ZeroDivisionError):
            return None
    return None


def go_equal(later: Any, earlier: Any) -> bool:
    """jsonschema v6's ``equals(later, earlier)``: the later item's kind decides the comparison,
    so a number equals a string holding the same number, but not the other way round."""
    if isinstance(later, dict):
        if not isinstance(earlier, dict) or len(later) != len(earlier):
            return False
        return all(k in earlier and go_equal(v, earlier[k]) for k, v in later.items())
    if isinstance(later, list):
        if not isinstance(earlier, list) or len(later) != len(earlier):
            return False
        return all(go_equal(a, b) for a, b in zip(later, earlier, strict=True))
    if later is None:
        return earlier is None
    if isinstance(later, bool):
        return isinstance(earlier, bool) and later == earlier
    if isinstance(later, str):
        return isinstance(earlier, str) and later == earlier
    if _number(later):
        a, b = _rational(later), _rational(earlier)
        return a is not None and b is not None and a == b
    return False


def _hash_key(value: Any) -> Any:
    """The validator's hash of a value, as a comparable key (strings and numbers apart)."""
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k), _hash_key(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("seq", tuple(_hash_key(v) for v in value))
    if value is None or isinstance(value, bool | str):
        return (type(value).__name__, value)
    return ("num", _rational(value))


def duplicates(items: list[Any]) -> tuple[int, int] | None:
    """The first pair (earlier, later) the validator's ``uniqueItems`` calls equal, or None."""
    if len(items) <= _PAIRWISE_MAX:
        for i in range(1, len(items)):
            for j in range(i):
                if go_equal(items[i], items[j]):
                    return j, i
        return None
    groups: dict[Any, list[int]] = {}
    for i, item in enumerate(items):
        indexes = groups.setdefault(_hash_key(item), [])
        for j in indexes:
            if go_equal(item, items[j]):
                return j, i
        indexes.append(i)
    return None


def _long_forms(entries: Iterable[Any]) -> list[Any]:
    """compose-go's canonical ports: a short port becomes its long mappings (a range, several),
    a long one is kept as written."""
    out: list[Any] = []
    for entry in entries:
        if isinstance(entry, dict):
            out.append(entry)
        else:
            out.extend(parse_port(entry))
    return out


def _cast_target(entry: Any) -> Any:
    """Interpolation's type cast: a port's ``target`` written as a string is an integer."""
    if isinstance(entry, dict) and isinstance(entry.get("target"), str):
        try:
            return {**entry, "target": go_int(entry["target"])}
        except FormError:  # refused by the cast itself (tierctl.compose.casts), not here
            return entry
    return entry


#: Service lists the schema keeps unique that compose-go's unicity pass has no key for: two
#: equal entries (in one file, or once files are merged) are refused, never dropped.
UNKEYED = ("security_opt", "group_add", "external_links", "volumes_from", "device_cgroup_rules")
_CHECKED = ("ports", *UNKEYED)


class UniqueLists:
    """Each service's uniqueItems lists as Compose holds them between files (ports in their
    long forms, kept as written; the other lists as written)."""

    def __init__(self) -> None:
        self._lists: dict[tuple[str, str], list[Any]] = {}

    def add_file(self, services: Any) -> Iterator[tuple[str, str, int, int]]:
        """Merge one file's services (tags kept); yield ``(service, key, j, i)`` for each list
        the schema then refuses as its items ``j`` and ``i`` being equal."""
        lists = self._lists
        for name, body in (services if isinstance(services, Mapping) else {}).items():
            svc = str(name)
            if isinstance(body, Reset | Override):
                for k in [k for k in lists if k[0] == svc]:
                    del lists[k]
                if isinstance(body, Reset):
                    continue
                body = body.value
            if not isinstance(body, dict):
                continue
            for key in _CHECKED:
                if key in body:
                    self._merge((svc, key), body[key])
        for where, entries in list(lists.items()):
            try:
                merged = unique_by(entries, written_port_key) if where[1] == "ports" else entries
            except (TypeError, ValueError):
                del lists[where]  # not ports the reader can key: it refuses them itself
                continue
            pair = duplicates(merged)
            if pair is not None:
                yield where[0], where[1], pair[0], pair[1]
            if where[1] != "ports":
                continue
            try:
                lists[where] = unique_by(_long_forms(merged), written_port_key)
            except (FormError, TypeError, ValueError):
                del lists[where]  # a short port the reader refuses, located, on its own

    def _merge(self, where: tuple[str, str], value: Any) -> None:
        lists = self._lists
        if isinstance(value, Reset):
            lists[where] = []
            return
        if isinstance(value, Override):
            lists[where] = []
            value = value.value
        if not isinstance(value, list):
            lists.pop(where, None)  # the schema refuses it, located
            return
        cast = [_cast_target(p) for p in value] if where[1] == "ports" else list(value)
        lists[where] = [*lists.get(where, []), *cast]


def equal_items_text(key: str, j: int, i: int) -> tuple[str, str, str]:
    """What is said when Compose's schema check refuses items ``j`` and ``i`` of a service's
    merged ``key`` list as equal: (message, rule, fix)."""
    how = (
        " (a number equals an earlier string holding it)"
        if key == "ports"
        else "; Compose keeps no key for this list, so a repeat is refused, not dropped"
    )
    return (
        f"{key} items {j} and {i} of the merged list are equal as Compose's schema check "
        f"compares them once this file is merged{how}",
        f"compose-spec schema: {key} items are unique (docker compose validates each merged file)",
        f"give each {key} entry once"
        + (
            ", writing published the same way (a string, or a number) each time"
            if key == "ports"
            else ""
        ),
    )
