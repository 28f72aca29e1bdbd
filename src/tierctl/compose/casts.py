"""Typed values from strings, as Compose's interpolation casts them, path by path.

Compose reads every string at certain paths as the type its model holds there: ``tty:
"yes"`` is ``true``, ``deploy.replicas: "${R:-2}"`` is ``2``, ``cpu_count: "+7"`` is ``7``,
and a string that does not parse is refused ("failed to cast to expected type"). The cast
applies to any string there, written or substituted, in each file before the merge and the
schema check. The paths are compose-go's; how each parses was checked against the real
binary (``docker compose config`` v2.40.3) with good and bad strings at every path
(tests/compose_oracle/typed.py). The parsers follow Go's ``strconv``: no spaces, int64
range, ``_`` between a float's digits. A secret's or config's ``mode`` is not cast here:
Compose v2.40.3 reads a string mode as octal (``"440"`` is 0440), as
``tierctl.compose.project`` does.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterator
from typing import Any

from tierctl.compose.forms import FormError

#: A path step that matches any key of a mapping, or any item of a list.
ANY = "*"

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+")
_SPECIAL = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
            "+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan}  # fmt: skip
_FLOAT32_MAX = 3.4028234663852886e38


def _syntax(func: str, text: str, why: str) -> FormError:
    return FormError(
        f"failed to cast to expected type: strconv.{func}: parsing {_quoted(text)}: {why}",
        rule="Compose reads a string at this key as the key's type",
        fix="write the value as that type (a number, or true/false)",
    )


def _quoted(text: str) -> str:
    shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text):,} characters)"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_int(text: str, func: str = "Atoi") -> int:
    """Go's ``strconv.Atoi`` / ``ParseInt(text, 10, 64)`` (both int64 here).

    Raises:
        FormError: not a decimal integer, or past int64 (Go's wording).
    """
    if not _INT.fullmatch(text):
        raise _syntax(func, text, "invalid syntax")
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # int() of 4,300+ digits raises; past 19 is past int64 anyway
        raise _syntax(func, text, "value out of range")
    number = -int(digits) if text.startswith("-") else int(digits)
    if not -(2**63) <= number < 2**63:
        raise _syntax(func, text, "value out of range")
    return number


def go_float(text: str, bits: int = 64) -> float:
    """Go's ``strconv.ParseFloat(text, bits)``: decimal (``_`` between digits allowed),
    hexadecimal with a ``p`` exponent (``0x1p4``), ``inf``/``infinity``/``nan``; a 32-bit
    result is rounded to float32 and printed as its shortest decimal (compose-go's float32).
    A value Compose cannot print (infinite or NaN: its JSON refuses them) is refused too.

    Raises:
        FormError: not a number, past the type's range, or not finite (Go's wording).
    """
    value = _SPECIAL.get(text.lower())
    if value is None:
        plain = _without_separators(text)
        if plain is not None and _FLOAT.fullmatch(plain):
            value = float(plain)
        elif plain is not None and _HEX_FLOAT.fullmatch(plain):
            try:
                value = float.fromhex(plain)
            except OverflowError:  # 0x1p99999
                raise _syntax("ParseFloat", text, "value out of range") from None
        else:
            raise _syntax("ParseFloat", text, "invalid syntax")
        if math.isinf(value) or abs(value) > (_FLOAT32_MAX if bits == 32 else math.inf):
            raise _syntax("ParseFloat", text, "value out of range")
    if not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        raise FormError(
            f"json: unsupported value: {shown}",
            rule="Compose cannot print an infinite or NaN number (its JSON refuses it)",
            fix="write a finite number",
        )
    return float32(value) if bits == 32 else value


def _without_separators(text: str) -> str | None:
    """``text`` without its ``_`` digit separators, or None where one is misplaced (Go
    allows ``_`` only between digits, or after a base prefix)."""
    if "_" not in text:
        return text
    body = text.lstrip("+-")
    prefixed = body[:2].lower() == "0x"
    digits = "0123456789abcdefABCDEF" if prefixed else "0123456789"
    start = 2 if prefixed else 0
    for i, char in enumerate(body):
        if char != "_":
            continue
        before_ok = (i > 0 and body[i - 1] in digits) or (prefixed and i == start)
        if not before_ok or i + 1 >= len(body) or body[i + 1] not in digits:
            return None
    return text.replace("_", "")


def float32(value: float) -> float:
    """``value`` rounded to float32, as the shortest decimal that reads back to it (how Go
    prints a float32: ``123456789`` is 123456790)."""
    if not math.isfinite(value) or abs(value) > _FLOAT32_MAX:
        return value
    (single,) = struct.unpack("f", struct.pack("f", value))
    for digits in range(1, 10):
        shown = float(f"{single:.{digits}g}")
        if struct.unpack("f", struct.pack("f", shown))[0] == single:
            return shown
    return float(single)


_TRUE = ("true", "y", "yes", "on")
_FALSE = ("false", "n", "no", "off")


def go_bool(text: str) -> bool:
    """compose-go's boolean: true/false, and YAML 1.1's y/yes/on and n/no/off (it warns
    about those), any case.

    Raises:
        FormError: anything else.
    """
    lowered = text.lower()
    if lowered in _TRUE or lowered in _FALSE:
        return lowered in _TRUE
    raise FormError(
        f"failed to cast to expected type: invalid boolean: {_quoted(text)[1:-1]}",
        rule="Compose reads a string at this key as a boolean (true or false)",
        fix="write true or false",
    )


Cast = Callable[[str], Any]


def _int64(text: str) -> int:
    return go_int(text, "ParseInt")


def _float32(text: str) -> float:
    return go_float(text, 32)


#: The casts under each service (``ANY``: any key or list item).
SERVICE_CASTS: dict[tuple[str, ...], Cast] = {
    ("cpu_count",): _int64,
    ("cpu_percent",): go_float,
    ("cpu_period",): _int64,
    ("cpu_quota",): _int64,
    ("cpu_rt_period",): _int64,
    ("cpu_rt_runtime",): _int64,
    ("cpu_shares",): _int64,
    ("cpus",): _float32,
    ("init",): go_bool,
    ("deploy", "replicas"): go_int,
    ("deploy", "update_config", "parallelism"): go_int,
    ("deploy", "update_config", "max_failure_ratio"): go_float,
    ("deploy", "rollback_config", "parallelism"): go_int,
    ("deploy", "rollback_config", "max_failure_ratio"): go_float,
    ("deploy", "restart_policy", "max_attempts"): go_int,
    ("deploy", "placement", "max_replicas_per_node"): go_int,
    ("healthcheck", "retries"): go_int,
    ("healthcheck", "disable"): go_bool,
    ("oom_kill_disable",): go_bool,
    ("oom_score_adj",): _int64,
    ("pids_limit",): _int64,
    ("ports", ANY, "target"): go_int,
    ("privileged",): go_bool,
    ("read_only",): go_bool,
    ("scale",): go_int,
    ("stdin_open",): go_bool,
    ("tty",): go_bool,
    ("volumes", ANY, "read_only"): go_bool,
    ("volumes", ANY, "volume", "nocopy"): go_bool,
    ("volumes", ANY, "bind", "create_host_path"): go_bool,
}

#: The casts under each named network, volume, secret and config.
RESOURCE_CASTS: dict[str, dict[tuple[str, ...], Cast]] = {
    "networks": {
        ("external",): go_bool,
        ("internal",): go_bool,
        ("attachable",): go_bool,
        ("enable_ipv6",): go_bool,
    },
    "volumes": {("external",): go_bool},
    "secrets": {("external",): go_bool},
    "configs": {("external",): go_bool},
}


#: Service keys compose-go decodes into unsigned Go ints: a negative one is refused when the
#: project is decoded ("-1 overflows uint").
UNSIGNED: dict[tuple[str, ...], str] = {
    ("healthcheck", "retries"): "uint64",
    ("deploy", "update_config", "parallelism"): "uint64",
    ("deploy", "rollback_config", "parallelism"): "uint64",
    ("deploy", "restart_policy", "max_attempts"): "uint64",
    ("deploy", "placement", "max_replicas_per_node"): "uint64",
    ("ports", ANY, "target"): "uint32",
    ("blkio_config", "weight"): "uint16",
    ("blkio_config", "weight_device", ANY, "weight"): "uint16",
}


def negative_unsigned(service: dict[str, Any]) -> tuple[tuple[str | int, ...], str, int] | None:
    """The first (path, Go type, value) of ``service`` (merged) where an unsigned key holds a
    negative int, as compose-go's decoding refuses it; None when there is none."""
    for steps, kind in UNSIGNED.items():
        for parent, key, path in _matches(service, steps, ()):
            value = parent[key]
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                return path, kind, value
    return None


def go_field_path(service: str, path: tuple[str | int, ...]) -> str:
    """A path as compose-go's decoder names it: ``services[a].ports[0].target``."""
    out = f"services[{service}]"
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def _matches(
    node: Any, steps: tuple[str, ...], path: tuple[str | int, ...]
) -> Iterator[tuple[Any, str | int, tuple[str | int, ...]]]:
    """Each (parent, key, path) that ``steps`` reach below ``node``."""
    if not steps:
        return
    step, rest = steps[0], steps[1:]
    if isinstance(node, dict):
        keys: list[str | int] = list(node) if step == ANY else [step] if step in node else []
    elif isinstance(node, list) and step == ANY:
        keys = list(range(len(node)))
    else:
        return
    for key in keys:
        child = node[key]
        if rest:
            yield from _matches(child, rest, (*path, key))
        else:
            yield node, key, (*path, key)


def cast_strings(
    document: dict[str, Any], refuse: Callable[[FormError, tuple[str | int, ...]], Exception]
) -> dict[str, Any]:
    """``document`` (one file, interpolated) with each string at a typed path cast: a copy
    when any is (the file's own document is not changed), else ``document`` itself.
    ``refuse(error, path)`` builds the located error raised for a string that does not
    parse."""
    plan: list[tuple[tuple[str, ...], Cast]] = [
        (("services", ANY, *steps), cast) for steps, cast in SERVICE_CASTS.items()
    ]
    for section, casts in RESOURCE_CASTS.items():
        plan.extend(((section, ANY, *steps), cast) for steps, cast in casts.items())
    found = [
        (path, cast)
        for steps, cast in plan
        for parent, key, path in _matches(document, steps, ())
        if isinstance(parent[key], str)
    ]
    if not found:
        return document
    out: dict[str, Any] = _copy(document)
    for path, cast in found:
        parent = out
        for step in path[:-1]:
            parent = parent[step]  # type: ignore[index]
        try:
            parent[path[-1]] = cast(parent[path[-1]])  # type: ignore[index]
        except FormError as exc:
            raise refuse(exc, path) from None
    return out


def _copy(node: Any) -> Any:
    """A copy of the mappings and lists (the file's own document is not changed)."""
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


__all__ = [
    "ANY",
    "RESOURCE_CASTS",
    "SERVICE_CASTS",
    "UNSIGNED",
    "cast_strings",
    "float32",
    "go_bool",
    "go_field_path",
    "go_float",
    "go_int",
    "negative_unsigned",
]
