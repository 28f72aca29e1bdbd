"""A small, deterministic YAML emitter for compose files.

General YAML dumpers choose quoting and line folding by heuristics that differ between
libraries and versions; a generated file that is diffed by ``render --check`` must be
byte-identical everywhere. This emitter writes block style only, quotes every string that a
YAML 1.1 or 1.2 reader could take for something else (booleans, numbers, sexagesimals such as
``22:22``, nulls), and writes multi-line strings as literal blocks.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# A plain scalar may start with '-' only when a non-space follows (`--port` is fine).
_PLAIN = re.compile(r"^(?:[A-Za-z0-9_/.]|-[A-Za-z_-])[A-Za-z0-9_./@+=-]*$")
# Strings some YAML reader (1.1 or 1.2) would take for a bool, null, number or date.
_AMBIGUOUS = re.compile(
    r"^(y|n|yes|no|true|false|on|off|null|~|[-+]?\.(inf|nan)|[-+]?\.?[0-9][0-9_.eE+-]*"
    r"|[-+]?0x[0-9a-f_]+|[-+]?0o?[0-7_]+|[-+]?0b[01_]+)$",
    re.I,
)


@functools.lru_cache(maxsize=8192)
def _string(text: str) -> str:
    """Plain when unambiguous, else double-quoted (cached: flags and keys repeat a lot)."""
    if _PLAIN.fullmatch(text) and not _AMBIGUOUS.fullmatch(text):
        return text
    return _double_quoted(text)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return ".nan" if value != value else (".inf" if value > 0 else "-.inf")
        text = repr(value)
        # YAML 1.1 readers (PyYAML) need a dot in exponent form: 1e-05 -> 1.0e-05.
        if "e" in text and "." not in text:
            text = text.replace("e", ".0e", 1)
        return text
    return _string(str(value))


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _double_quoted(text: str) -> str:
    """A YAML double-quoted scalar; non-printable characters use YAML's own escapes
    (JSON's surrogate pairs for astral characters are not read back by YAML readers)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
    return '"' + "".join(out) + '"'


def _literal_ok(text: str) -> bool:
    """A string can be a literal block when it is multi-line and round-trips exactly."""
    if "\n" not in text or text.startswith((" ", "\n")) or "\t" in text or "\r" in text:
        return False
    body = text[:-1] if text.endswith("\n") else text
    return all(line == line.rstrip() and line.isprintable() for line in body.split("\n")) and (
        not body.endswith("\n")
    )


def _emit(value: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            k = _scalar(str(key))
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}{k}:")
                _emit(item, indent + 2, out)
            elif isinstance(item, str) and _literal_ok(item):
                chomp = "" if item.endswith("\n") else "-"
                out.append(f"{pad}{k}: |{chomp}")
                body = item[:-1] if item.endswith("\n") else item
                out.extend(f"{pad}  {line}" if line else "" for line in body.split("\n"))
            else:
                out.append(f"{pad}{k}: {_inline(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                out.append(f"{pad}- {sub[0].lstrip()}")
                out.extend(sub[1:])
            else:
                out.append(f"{pad}- {_inline(item)}")
    else:
        out.append(f"{pad}{_inline(value)}")


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump_yaml(doc: Any) -> str:
    """Emit ``doc`` (dicts, lists, scalars) as block YAML ending with one newline."""
    out: list[str] = []
    _emit(doc, 0, out)
    return "\n".join(out) + "\n"
