"""Step logs: one JSON line per scheduler step, the input of ``tierctl sim fit``.

A line is ``{"kind": "prefill", "chunks": [[new, cached], ...], "duration_s": t}`` (or
``"new_tokens"``/``"cached_tokens"`` for a one-request step) or
``{"kind": "decode", "batch_size": B, "context_tokens": K, "duration_s": t}``. Mixed and idle
steps are skipped when fitting.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.paths import write_owned
from tierctl.readers import Limits, json_line, read_text
from tierctl.sim.config import MAX_COUNT
from tierctl.sim.cost import CostModel, DecodeSample, PrefillSample, fit, preset
from tierctl.sim.engine import Round


def write_steps(rounds: list[Round], path: str | Path, *, force: bool = False) -> None:
    """Write simulated rounds as a step log (atomically, :func:`tierctl.paths.write_owned`).

    Raises:
        InputError: ``path`` holds another file and ``force`` is not given (a step log
            carries no mark of its writer, so any other content is someone's data).
    """
    lines = []
    for r in rounds:
        obj: dict[str, Any] = {"kind": r.kind, "duration_s": r.duration_s}
        if r.kind in ("prefill", "mixed"):
            obj["chunks"] = [list(c) for c in r.chunks]
        if r.kind in ("decode", "mixed"):
            obj["batch_size"] = r.batch_size
            obj["context_tokens"] = r.context_tokens
        lines.append(json.dumps(obj) + "\n")
    write_owned(Path(path), "".join(lines), ours=lambda _: False, force=force, what="step log")


def read_steps(path: str | Path) -> tuple[list[PrefillSample], list[DecodeSample]]:
    """Read a step log.

    Raises:
        InputError: the file cannot be read or a line is malformed (file and line named).
    """
    p = Path(path)
    limits = Limits.trace()
    lines = read_text(p, what="step log", limits=limits).splitlines()
    pre: list[PrefillSample] = []
    dec: list[DecodeSample] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        loc = Location(file=str(p), line=n)
        # Bounded (depth, digits) and located: json.loads of "[[[..." was a RecursionError.
        obj = json_line(line, str(p), n, limits=limits)
        try:
            kind = obj["kind"]
            dur = _seconds(obj["duration_s"])
            if kind == "prefill":
                if "chunks" in obj:
                    chunks = tuple((_count(c), _count(q)) for c, q in obj["chunks"])
                else:
                    chunks = ((_count(obj["new_tokens"]), _count(obj.get("cached_tokens", 0))),)
                pre.append(PrefillSample(chunks, dur))
            elif kind == "decode":
                size, context = _count(obj["batch_size"]), _count(obj["context_tokens"])
                dec.append(DecodeSample(size, context, dur))
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            raise InputError(
                f"malformed step: {exc!r}",
                location=loc,
                rule="a step is a JSON object with kind, duration_s and its sizes",
                fix="see docs/sim.md, 'Step logs'",
            ) from None
    return pre, dec


def _count(value: Any) -> int:
    """A step's token or sequence count: 0 to 2**53 (a chunk of 1e308 tokens squared to inf,
    and the least-squares fit's SVD did not converge)."""
    x = int(value)
    if not 0 <= x <= MAX_COUNT:
        raise ValueError(f"a count must be from 0 to 2**53, got {value!r}")
    return x


def _seconds(value: Any) -> float:
    """A step's duration: a finite number of seconds, at least 0."""
    x = float(value)
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"a duration must be a finite number >= 0, got {value!r}")
    return x


def fit_file(path: str | Path, base: str = "glm53-flash-w4afp8-tp4-h200") -> CostModel:
    """Fit the cost model to a step log, keeping ``base``'s overhead and memory sizes."""
    pre, dec = read_steps(path)
    return fit(pre, dec, base=preset(base), name=f"fitted:{Path(path).name}")
