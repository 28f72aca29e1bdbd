"""Traces as simulator workloads: read with :mod:`tierctl.traces`, write tierctl JSONL.

The formats are described in docs/traces.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tierctl.paths import write_owned
from tierctl.sim.workload import SimRequest, Workload
from tierctl.traces import read_trace


def read_workload(path: str | Path, fmt: str = "jsonl") -> Workload:
    """Read a trace file into a workload, keeping the file's arrival offsets.

    Requests without a ``rid`` in the file are named ``<file stem>-<index by arrival>``.

    Raises:
        InputError: the file cannot be read, the format is unknown, or a row is malformed.
    """
    stem = Path(path).stem
    # Keep the offsets: a trace written from a workload must read back as that workload.
    rows = read_trace(path, fmt, rebase=False)
    reqs = [
        SimRequest(
            row.rid if row.rid is not None else f"{stem}-{i}",
            row.arrival_s,
            row.input_tokens,
            row.output_tokens,
            row.hash_ids,
            row.block_tokens,
        )
        for i, row in enumerate(rows)
    ]
    return Workload.of(stem, reqs)


def write_jsonl(workload: Workload, path: str | Path, *, force: bool = False) -> None:
    """Write a workload in tierctl's JSONL trace format (atomically,
    :func:`tierctl.paths.write_owned`).

    Raises:
        InputError: ``path`` holds another file and ``force`` is not given (a trace carries
            no mark of its writer, so any other content is someone's data).
    """
    lines = []
    for r in workload.requests:
        obj: dict[str, Any] = {
            "rid": r.rid,
            "arrival_s": r.arrival_s,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
        }
        if r.block_hashes:
            obj["hash_ids"] = list(r.block_hashes)
        lines.append(json.dumps(obj) + "\n")
    write_owned(Path(path), "".join(lines), ours=lambda _: False, force=force, what="trace")
