"""Readers for recorded request traces: arrival time, prompt tokens, output tokens.

Formats:

* ``jsonl`` — one object per line: ``{"arrival_s": 0.0, "input_tokens": 512, "output_tokens": 64}``.
* ``mooncake`` — Mooncake's JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``.
* ``azure`` — Azure LLM inference CSV: ``TIMESTAMP`` (datetime), ``ContextTokens``,
  ``GeneratedTokens``.
* ``burstgpt`` — BurstGPT CSV: ``Timestamp`` (s), ``Request tokens``, ``Response tokens``.

Every reader returns rows sorted by arrival, shifted so that the first arrives at 0 s. A bad row
raises :class:`~tierctl.errors.InputError` naming ``file:line``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tierctl.errors import InputError, Location


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    line: int


class _BadRow(ValueError):
    pass


def read_trace(
    path: str | Path,
    fmt: str,
    *,
    limit: int | None = None,
) -> list[TraceRow]:
    """Read a trace file in format ``fmt``; rows sorted by arrival, first at 0 s.

    Raises:
        InputError: unreadable file, unknown format, or a bad row (``file:line``).
    """
    file = Path(path)
    reader = _READERS.get(fmt)
    if reader is None:
        raise InputError(
            f"unknown trace format {fmt!r}",
            value=fmt,
            fix=f"use one of: {', '.join(sorted(_READERS))}",
        )
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read trace file: {exc}",
            location=Location(file=str(file)),
            fix="pass an existing UTF-8 trace file",
        ) from exc
    rows: list[TraceRow] = []
    for line_no, raw in reader(text, str(file)):
        try:
            rows.append(_row(raw, line_no))
        except _BadRow as exc:
            raise InputError(
                f"bad {fmt} trace row: {exc}",
                location=Location(file=str(file), line=line_no),
                rule="arrival >= 0 and token counts are positive integers",
                fix="fix or delete the row",
            ) from None
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise InputError(
            "the trace has no rows", location=Location(file=str(file)), fix="pass a non-empty trace"
        )
    rows.sort(key=lambda r: r.arrival_s)
    t0 = rows[0].arrival_s
    return [TraceRow(r.arrival_s - t0, r.input_tokens, r.output_tokens, r.line) for r in rows]


def _row(raw: tuple[Any, Any, Any], line: int) -> TraceRow:
    arrival, inp, out = raw
    a = _number(arrival, "arrival")
    if a < 0:
        raise _BadRow(f"negative arrival {arrival!r}")
    i = _count(inp, "input tokens", minimum=1)
    # A logged request may have produced nothing (BurstGPT logs failures); still ask for 1.
    o = max(1, _count(out, "output tokens", minimum=0))
    return TraceRow(a, i, o, line)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise _BadRow(f"{what} is not a number: {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _BadRow(f"{what} is not a number: {value!r}") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise _BadRow(f"{what} is not finite: {value!r}")
    return x


def _count(value: Any, what: str, *, minimum: int) -> int:
    x = _number(value, what)
    if x != int(x) or x < minimum:
        raise _BadRow(f"{what} must be an integer >= {minimum}: {value!r}")
    return int(x)


RawRows = Iterator[tuple[int, tuple[Any, Any, Any]]]


def _jsonl(keys: tuple[str, str, str], scale: float) -> Callable[[str, str], RawRows]:
    def read(text: str, file: str) -> RawRows:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"not JSON: {exc}", location=Location(file=file, line=n)) from None
            if not isinstance(obj, dict):
                raise InputError(
                    "each line must be a JSON object", location=Location(file=file, line=n)
                )
            missing = [k for k in keys if k not in obj]
            if missing:
                raise InputError(
                    f"missing field(s) {', '.join(missing)}",
                    location=Location(file=file, line=n),
                    fix=f"each row needs {', '.join(keys)}",
                )
            arrival = obj[keys[0]]
            if isinstance(arrival, int | float) and not isinstance(arrival, bool):
                arrival = arrival * scale
            yield n, (arrival, obj[keys[1]], obj[keys[2]])

    return read


def _csv(
    keys: tuple[str, str, str], arrival: Callable[[str], float]
) -> Callable[[str, str], RawRows]:
    def read(text: str, file: str) -> RawRows:
        reader = csv.DictReader(io.StringIO(text))
        header = reader.fieldnames or []
        missing = [k for k in keys if k not in header]
        if missing:
            raise InputError(
                f"CSV header lacks column(s) {', '.join(missing)}",
                location=Location(file=file, line=1),
                value=header,
                fix=f"the header must name {', '.join(keys)}",
            )
        for rec in reader:
            n = reader.line_num
            try:
                t = arrival(rec[keys[0]])
            except _BadRow as exc:
                raise InputError(
                    f"bad trace row: {exc}", location=Location(file=file, line=n)
                ) from None
            yield n, (t, rec[keys[1]], rec[keys[2]])

    return read


def _seconds(value: str | None) -> float:
    return _number(value, "timestamp")


def _azure_time(value: str | None) -> float:
    if not value:
        raise _BadRow("empty TIMESTAMP")
    text = value.strip()
    # Azure writes 7 fractional digits; datetime parses at most 6.
    head, dot, frac = text.partition(".")
    if dot:
        text = f"{head}.{frac[:6]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise _BadRow(f"TIMESTAMP is not a date-time: {value!r}") from None


_READERS: dict[str, Callable[[str, str], RawRows]] = {
    "jsonl": _jsonl(("arrival_s", "input_tokens", "output_tokens"), 1.0),
    "mooncake": _jsonl(("timestamp", "input_length", "output_length"), 1e-3),
    "azure": _csv(("TIMESTAMP", "ContextTokens", "GeneratedTokens"), _azure_time),
    "burstgpt": _csv(("Timestamp", "Request tokens", "Response tokens"), _seconds),
}

#: The trace formats :func:`read_trace` understands.
TRACE_FORMATS = tuple(sorted(_READERS))
