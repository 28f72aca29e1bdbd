"""The agent's operation log: one JSON line per event, appended, never rewritten.

Every operation writes a ``begin`` line before compose starts and an ``end`` line (its exit
code, how long it took) when compose is done; an agent that was killed in between leaves a
``begin`` without its ``end``, and the next agent to start on the same log appends an
``interrupted`` line for each such operation, so the log tells an operator which calls never
finished. A line holds what was asked (operation, project, tag, commit, file, services, dry
run, the caller's address) and never the request's environment values or the token.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class OperationLog:
    """Append-only JSON lines in ``path`` (created with mode 0600)."""

    def __init__(self, path: Path) -> None:
        """Open (create) the log."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: every line lands at the end even with another writer; 0600: the log names
        # what ran on the host.
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        size = os.fstat(self._fd).st_size
        if size:
            with path.open("rb") as tail:
                tail.seek(size - 1)
                if tail.read(1) != b"\n":
                    # A crash mid-write left a torn line: end it, or the next record would be
                    # glued to it and lost with it.
                    os.write(self._fd, b"\n")

    def close(self) -> None:
        """Close the log."""
        os.close(self._fd)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line, with its time, and flush it to disk."""
        line = json.dumps({"time": round(time.time(), 3), **record}, sort_keys=True) + "\n"
        os.write(self._fd, line.encode())
        os.fsync(self._fd)

    def mark_interrupted(self) -> list[str]:
        """Append ``interrupted`` for every operation that began and never ended; their ids."""
        begun: dict[str, dict[str, Any]] = {}
        for record in read_log(self.path):
            op = str(record.get("op_id", ""))
            if record.get("event") == "begin":
                begun[op] = record
            elif record.get("event") in ("end", "interrupted"):
                begun.pop(op, None)
        for op, record in begun.items():
            self.append(
                {
                    "event": "interrupted",
                    "op_id": op,
                    "operation": record.get("operation"),
                    "project": record.get("project"),
                    "services": record.get("services"),
                }
            )
        return list(begun)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's records, in order (a torn last line, from a crash mid-write, is skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
