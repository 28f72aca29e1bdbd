"""Recorded request traces: one reader for the simulator and the load generator.

Each row gives an arrival time, prompt tokens and output tokens; JSON formats may also carry
Mooncake-style ``hash_ids`` (chained hashes of the prompt's :data:`BLOCK_TOKENS`-token blocks)
for the simulator's prefix cache. The formats are described once, in docs/traces.md.

Rows come back sorted by arrival (stable). A bad row raises
:class:`~tierctl.errors.InputError` (exit 2) naming ``file:line``. Only the standard library is
imported, so the base CLI can read traces without the ``sim``/``bench`` extras.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tierctl.errors import InputError, Location
from tierctl.readers import Limits, csv_rows, json_line, text_lines

#: Tokens per hashed prompt block: Mooncake's ``hash_ids`` name 512-token blocks.
BLOCK_TOKENS = 512

TraceFormat = Literal["jsonl", "mooncake", "azure", "burstgpt"]

#: The trace formats :func:`read_trace` understands.
TRACE_FORMATS: tuple[str, ...] = ("jsonl", "mooncake", "azure", "burstgpt")


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace.

    ``line`` is the row's 1-based line in the file; ``rid`` is the file's request id, if it
    names one; ``hash_ids`` chain the prompt's ``block_tokens``-sized blocks (empty: unknown).
    """

    arrival_s: float
    input_tokens: int
    output_tokens: int
    line: int
    rid: str | None = None
    hash_ids: tuple[int, ...] = ()
    block_tokens: int = BLOCK_TOKENS


@dataclass(frozen=True, slots=True)
class _Raw:
    line: int
    arrival: Any
    input_tokens: Any
    output_tokens: Any
    rid: str | None = None
    hash_ids: tuple[int, ...] = ()


# (lines, file, keys, share): ``share`` makes equal block hashes one int object across rows.
_Reader = Callable[[Iterator[str], str, tuple[str, str, str], bool], Iterator[_Raw]]


class _BadRow(ValueError):
    pass


@dataclass(frozen=True)
class _Format:
    keys: tuple[str, str, str]  # arrival, input tokens, output tokens
    read: _Reader
    # A wall-clock arrival (a date-time) means nothing until made relative to the first row.
    wall_clock: bool = False


def read_trace(
    path: str | Path,
    fmt: str = "jsonl",
    *,
    limit: int | None = None,
    rebase: bool = True,
) -> list[TraceRow]:
    """Read a trace file; rows sorted by arrival.

    Args:
        path: the trace file (UTF-8).
        fmt: one of :data:`TRACE_FORMATS`.
        limit: keep only the first ``limit`` rows of the file.
        rebase: shift arrivals so the first is at 0 s. Date-time arrivals (``azure``) are
            always made relative to the earliest row.

    Raises:
        InputError: unreadable file, unknown format, no rows, or a bad row (``file:line``).
    """
    file = Path(path)
    spec = _format(fmt)
    rows: list[TraceRow] = []
    stream = iter_trace(file, fmt)
    try:
        for row in stream:
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    finally:
        stream.close()  # a `limit` stops early: the file is closed now, not at collection
    if not rows:
        raise InputError(
            "the trace has no rows (no requests to replay)",
            location=Location(file=str(file)),
            fix="pass a non-empty trace",
        )
    rows.sort(key=lambda r: r.arrival_s)
    t0 = rows[0].arrival_s if rebase or spec.wall_clock else 0.0
    if t0 != 0.0:
        # In place, one row at a time: a second list of every row doubled the peak.
        for k, r in enumerate(rows):
            rows[k] = TraceRow(
                r.arrival_s - t0, r.input_tokens, r.output_tokens, r.line, r.rid, r.hash_ids
            )
    return rows


def _format(fmt: str) -> _Format:
    spec = _FORMATS.get(fmt)
    if spec is None:
        raise InputError(
            f"unknown trace format {fmt!r}",
            value=fmt,
            fix=f"use one of: {', '.join(TRACE_FORMATS)}",
        )
    return spec


def iter_trace(
    path: str | Path, fmt: str = "jsonl", *, share_hashes: bool = True
) -> Generator[TraceRow, None, None]:
    """The rows of a trace file in file order, checked one at a time, read as a stream (one
    line in memory at a time): what :func:`read_trace` sorts, and what a consumer that can
    take rows as they come (``tierctl sim run --trace``) reads in bounded memory.

    Arrivals are as written (not rebased, not sorted); a file with no rows yields nothing.
    ``share_hashes`` makes equal block hashes one object across rows (what rows held together
    save); a consumer that drops each row passes False and keeps no table of them.

    Raises:
        InputError: unreadable file, unknown format, or a bad row (``file:line``).
    """
    file = Path(path)
    spec = _format(fmt)
    lines = text_lines(file, what="trace", limits=Limits.trace())
    try:
        for raw in spec.read(lines, str(file), spec.keys, share_hashes):
            try:
                row = _row(raw)
            except _BadRow as exc:
                raise InputError(
                    f"bad {fmt} trace row: {exc}",
                    location=Location(file=str(file), line=raw.line),
                    rule="arrival >= 0 and token counts are positive integers",
                    fix=f"each row needs numeric {', '.join(spec.keys)}; fix or delete the row",
                ) from None
            yield row
    finally:
        lines.close()  # a consumer that stops early: the file is closed now


def wall_clock(fmt: str) -> bool:
    """Whether ``fmt``'s arrivals are date-times (made relative to the first row)."""
    return _format(fmt).wall_clock


def _row(raw: _Raw) -> TraceRow:
    a = _number(raw.arrival, "arrival")
    if a < 0:
        raise _BadRow(f"negative arrival {raw.arrival!r}")
    i = _count(raw.input_tokens, "input tokens", minimum=1)
    # A logged request may have produced nothing (BurstGPT logs failures); still ask for 1.
    o = max(1, _count(raw.output_tokens, "output tokens", minimum=0))
    return TraceRow(a, i, o, raw.line, raw.rid, raw.hash_ids)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise _BadRow(f"{what} is not a number: {_short(value)}")
    if isinstance(value, str) and len(value) > _MAX_NUMBER_CHARS:
        raise _BadRow(f"{what} is not a number: {_short(value)}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _BadRow(f"{what} is not a number: {_short(value)}") from None
    except OverflowError:
        raise _BadRow(f"{what} is too large: {_short(value)}") from None
    if not math.isfinite(x):
        raise _BadRow(f"{what} is not finite: {_short(value)}")
    if x > _MAX_SECONDS_OR_TOKENS:
        raise _BadRow(f"{what} is over {_MAX_SECONDS_OR_TOKENS:.0e}: {_short(value)}")
    return x


# A trace spans at most ~31 years of seconds or a trillion tokens; larger values are corrupt,
# and one arrival near 1e35 s made the simulator's clock stop advancing (float precision).
_MAX_SECONDS_OR_TOKENS = 1e12
_MAX_NUMBER_CHARS = 64


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _count(value: Any, what: str, *, minimum: int) -> int:
    x = _number(value, what)
    if x != int(x) or x < minimum:
        raise _BadRow(f"{what} must be an integer >= {minimum}: {_short(value)}")
    return int(x)


def _jsonl(divisor: float) -> _Reader:
    """A JSON-lines reader whose arrival field is in seconds times ``divisor``."""

    def read(
        lines: Iterator[str], file: str, keys: tuple[str, str, str], share: bool
    ) -> Iterator[_Raw]:
        limits = Limits.trace()  # once: reading the environment per line was most of the time
        # Block hashes repeat across rows (shared prompt prefixes are what they encode): each
        # distinct id is kept once, not once per row (28 bytes an int). The table stops
        # growing at _INTERN_MAX ids, so a trace of unique ids costs at most that much more.
        interned: dict[int, int] = {}
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            obj = json_line(line, file, n, limits=limits)
            loc = Location(file=file, line=n)
            if not isinstance(obj, dict):
                raise InputError(
                    "each line must be a JSON object",
                    location=loc,
                    value=_short(obj),
                    fix="one JSON object per line",
                )
            missing = [k for k in keys if k not in obj]
            if missing:
                raise InputError(
                    f"missing field(s) {', '.join(missing)}",
                    location=loc,
                    fix=f"each row needs {', '.join(keys)}",
                )
            hashes = obj.get("hash_ids", [])
            if not isinstance(hashes, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) for h in hashes
            ):
                raise InputError(
                    "hash_ids must be a list of integers", location=loc, value=_short(hashes)
                )
            arrival = obj[keys[0]]
            if isinstance(arrival, int | float) and not isinstance(arrival, bool):
                try:
                    arrival = arrival / divisor
                except OverflowError:  # an int too large for a float
                    arrival = math.inf
            rid = obj.get("rid")
            yield _Raw(
                n,
                arrival,
                obj[keys[1]],
                obj[keys[2]],
                None if rid is None else str(rid),
                _intern(hashes, interned) if share else tuple(hashes),
            )

    return read


#: The most distinct block hashes one trace read shares (about 100 MiB of table at most).
_INTERN_MAX = 1 << 20


def _intern(hashes: list[int], table: dict[int, int]) -> tuple[int, ...]:
    """``hashes`` as a tuple whose ints are shared with earlier rows' equal ones."""
    if len(table) < _INTERN_MAX:
        return tuple([table.setdefault(h, h) for h in hashes])
    return tuple([table.get(h, h) for h in hashes])


def _csv(arrival: Callable[[str | None], float]) -> _Reader:
    """A CSV reader (header row naming the columns) with an arrival parser."""

    def read(
        lines: Iterator[str], file: str, keys: tuple[str, str, str], share: bool
    ) -> Iterator[_Raw]:
        header, records = csv_rows(lines, file)
        missing = [k for k in keys if k not in header]
        if missing:
            raise InputError(
                f"CSV header lacks column(s) {', '.join(missing)}",
                location=Location(file=file, line=1),
                value=[_short(h) for h in header[:20]],
                fix=f"the header must name {', '.join(keys)}",
            )
        for n, rec in records:
            try:
                t = arrival(rec[keys[0]])
            except _BadRow as exc:
                raise InputError(
                    f"bad trace row: {exc}", location=Location(file=file, line=n)
                ) from None
            yield _Raw(n, t, rec[keys[1]], rec[keys[2]])

    return read


def _seconds(value: str | None) -> float:
    return _number(value, "timestamp")


def _date_time(value: str | None) -> float:
    if not value:
        raise _BadRow("empty TIMESTAMP")
    text = value.strip()
    # Azure writes 7 fractional digits; datetime parses at most 6.
    head, dot, frac = text.partition(".")
    if dot:
        text = f"{head}.{frac[:6]}"
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise _BadRow(f"TIMESTAMP is not a date-time: {value!r}") from None
    # Only differences matter; reading a naive stamp as UTC keeps them free of local DST shifts.
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


_FORMATS: dict[str, _Format] = {
    "jsonl": _Format(("arrival_s", "input_tokens", "output_tokens"), _jsonl(1.0)),
    "mooncake": _Format(("timestamp", "input_length", "output_length"), _jsonl(1000.0)),
    "azure": _Format(
        ("TIMESTAMP", "ContextTokens", "GeneratedTokens"), _csv(_date_time), wall_clock=True
    ),
    "burstgpt": _Format(("Timestamp", "Request tokens", "Response tokens"), _csv(_seconds)),
}
