"""Readers for request traces: tierctl JSONL, Mooncake JSONL and Azure LLM-inference CSV.

Formats (documented in docs/sim.md):

* ``jsonl`` — one object per line: ``arrival_s`` (seconds), ``input_tokens``,
  ``output_tokens``, optional ``hash_ids`` (list of ints) and ``rid``.
* ``mooncake`` — Mooncake's trace lines: ``timestamp`` (milliseconds), ``input_length``,
  ``output_length``, ``hash_ids`` (512-token blocks).
* ``azure`` — Azure's CSV with a header ``TIMESTAMP,ContextTokens,GeneratedTokens``; the
  timestamp is a date-time; arrivals are taken relative to the first row.

Every problem names the file and line.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.sim.workload import BLOCK_TOKENS, SimRequest, Workload

FORMATS = ("jsonl", "mooncake", "azure")


def read_trace(path: str | Path, fmt: str = "jsonl") -> Workload:
    """Read a trace file into a workload.

    Raises:
        InputError: the file cannot be read, the format is unknown, or a line is malformed.
    """
    p = Path(path)
    if fmt not in FORMATS:
        raise InputError(
            f"unknown trace format {fmt!r}",
            rule="the trace format is one of " + ", ".join(FORMATS),
            value=fmt,
            fix="pass --trace-format jsonl, mooncake or azure",
        )
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read trace: {exc.strerror}",
            location=Location(file=str(p)),
            fix="check the path",
        ) from None
    reqs = _read_azure(p, text) if fmt == "azure" else _read_jsonl(p, text, fmt)
    if not reqs:
        raise InputError(
            "the trace holds no requests", location=Location(file=str(p)), fix="check the file"
        )
    return Workload.of(p.stem, reqs)


def _read_jsonl(p: Path, text: str, fmt: str) -> list[SimRequest]:
    reqs: list[SimRequest] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        loc = Location(file=str(p), line=lineno)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"line is not JSON: {exc.msg}", location=loc, fix="one JSON object per line"
            ) from None
        if not isinstance(obj, dict):
            raise InputError("line is not a JSON object", location=loc, value=obj)
        if fmt == "mooncake":
            arrival = _num(obj, "timestamp", loc) / 1000.0
            inp = int(_num(obj, "input_length", loc))
            out = int(_num(obj, "output_length", loc))
        else:
            arrival = _num(obj, "arrival_s", loc)
            inp = int(_num(obj, "input_tokens", loc))
            out = int(_num(obj, "output_tokens", loc))
        hashes = obj.get("hash_ids", [])
        if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
            raise InputError("hash_ids must be a list of integers", location=loc, value=hashes)
        if inp < 1 or out < 1 or arrival < 0:
            raise InputError(
                "a request needs input and output tokens >= 1 and a non-negative arrival",
                location=loc,
                value=obj,
            )
        rid = str(obj.get("rid", f"{p.stem}-{len(reqs)}"))
        reqs.append(SimRequest(rid, arrival, inp, out, tuple(hashes), BLOCK_TOKENS))
    return reqs


def _num(obj: dict[str, Any], key: str, loc: Location) -> float:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(
            f"field {key!r} must be a number", location=loc, value=v, fix=f"add a numeric {key}"
        )
    return float(v)


def _read_azure(p: Path, text: str) -> list[SimRequest]:
    rows = csv.DictReader(text.splitlines())
    need = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
    if rows.fieldnames is None or not need <= set(rows.fieldnames):
        raise InputError(
            "not an Azure LLM-inference trace",
            location=Location(file=str(p), line=1),
            rule="the header must hold TIMESTAMP, ContextTokens and GeneratedTokens",
            value=rows.fieldnames,
        )
    reqs: list[SimRequest] = []
    t0: datetime | None = None
    for lineno, row in enumerate(rows, start=2):
        loc = Location(file=str(p), line=lineno)
        try:
            ts = datetime.fromisoformat(row["TIMESTAMP"].strip()[:26])
            inp, out = int(row["ContextTokens"]), int(row["GeneratedTokens"])
        except (ValueError, AttributeError) as exc:
            raise InputError(f"malformed row: {exc}", location=loc, value=row) from None
        t0 = t0 or ts
        reqs.append(
            SimRequest(f"{p.stem}-{len(reqs)}", (ts - t0).total_seconds(), max(inp, 1), max(out, 1))
        )
    return reqs


def write_jsonl(workload: Workload, path: str | Path) -> None:
    """Write a workload in tierctl's JSONL trace format."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in workload.requests:
            obj: dict[str, Any] = {
                "rid": r.rid,
                "arrival_s": r.arrival_s,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
            }
            if r.block_hashes:
                obj["hash_ids"] = list(r.block_hashes)
            fh.write(json.dumps(obj) + "\n")
