"""The bench results file (``results.json``): one definition for the step that writes it and
every step that reads it.

``tierctl bench run`` and ``bench ab`` write it (:mod:`tierctl.bench.report` builds the
documents on :func:`results_document`); ``tierctl sim fit --from bench`` reads its request
timings and the real-engine demo its counts, both through :func:`read_results`. The document::

    {"schema_version": 1, "tool": "tierctl X", "kind": "run", "workload": {...},
     "run": {"sent": N, "completed": N, "failed": N, "timed_out": N, "requests": [...], ...}}

and for ``"kind": "ab"`` the runs are ``"blocks"`` (each block a run with its arm and place).
Each request sample is a :class:`tierctl.bench.samples.RequestSample` as plain data, plus its
``tpot_s``. Reading is bounded (:mod:`tierctl.readers`); only the standard library is imported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tierctl.errors import InputError, Location
from tierctl.readers import Limits, load_json, read_bytes, read_text

#: The file name the bench writes into its output folder.
RESULTS_NAME = "results.json"
#: Version of the document's layout; bumped when a reader would misread a new file.
SCHEMA_VERSION = 1

ResultsKind = Literal["run", "ab"]
#: The kinds of results document: one run, or the blocks of an A/B.
RESULTS_KINDS: tuple[str, ...] = ("run", "ab")

#: How much of a file :func:`looks_like_results` reads to tell a results file from a log.
_SNIFF_BYTES = 4096


def results_document(
    kind: ResultsKind, tool: str, workload: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """The document the bench writes: the envelope (schema, tool, kind, workload), then
    ``body`` (``{"run": ...}`` for a run; the A/B's fields and ``"blocks"`` for an A/B)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": tool,
        "kind": kind,
        "workload": workload,
        **body,
    }


@dataclass(frozen=True)
class MeasuredRequest:
    """One completed request as measured (times in seconds from the run's start): what a bench
    results file holds per request, and what the simulator's fits and fidelity checks use."""

    sent_s: float
    input_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float | None
    itl_s: tuple[float, ...]


def _finite(value: Any) -> float:
    """A sample's number: finite (``1e400`` reads as inf, and ``int(inf)`` was an
    OverflowError in ``sim fit``; a NaN would poison every fit)."""
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {value!r}")
    return x


#: The longest a measured latency may be (about 11.6 days): a ``ttft_s`` of 1e308 is finite,
#: and a fit on it made the simulated inter-token gap inf (``int(inf)`` in the ITL histogram).
MAX_SAMPLE_S = 1e6

#: The shortest non-zero latency a clock measures (1 ns): a ``tpot_s`` of 5e-324 (a denormal)
#: overflowed the fit's log ratio to inf ("Residuals are not finite", scipy).
MIN_SAMPLE_S = 1e-9

#: The most tokens a request sample may count (far above any context window).
MAX_SAMPLE_TOKENS = 2**31


def _seconds(value: Any) -> float:
    """A sample's duration: 0, or :data:`MIN_SAMPLE_S` to :data:`MAX_SAMPLE_S`."""
    x = _finite(value)
    if not (x == 0.0 or MIN_SAMPLE_S <= x <= MAX_SAMPLE_S):
        raise ValueError(
            f"a duration of {value!r} s is neither 0 nor within {MIN_SAMPLE_S:g}..{MAX_SAMPLE_S:g}"
        )
    return x


def _tokens(value: Any) -> int:
    """A sample's token count: 0 to :data:`MAX_SAMPLE_TOKENS`."""
    x = _finite(value)
    if not 0 <= x <= MAX_SAMPLE_TOKENS:
        raise ValueError(f"a token count of {value!r} is outside 0..{MAX_SAMPLE_TOKENS}")
    return int(x)


@dataclass(frozen=True)
class ResultsRun:
    """One run (or one block of an A/B): its counts and its raw request samples."""

    sent: int
    completed: int
    failed: int
    timed_out: int
    requests: tuple[dict[str, Any], ...]

    def completed_requests(self, source: str) -> list[MeasuredRequest]:
        """The requests that completed with a first token, in the file's order.

        Raises:
            InputError: a sample lacks a field or holds a value of the wrong type.
        """
        out: list[MeasuredRequest] = []
        for i, r in enumerate(self.requests):
            try:
                if r["outcome"] != "completed" or r["ttft_s"] is None:
                    continue
                tpot = r.get("tpot_s")
                out.append(
                    MeasuredRequest(
                        sent_s=_finite(r["sent_s"]),
                        input_tokens=_tokens(r["input_tokens"]),
                        output_tokens=_tokens(r["output_tokens"]),
                        ttft_s=_seconds(r["ttft_s"]),
                        tpot_s=None if tpot is None else _seconds(tpot),
                        itl_s=tuple(_seconds(g) for g in r.get("itl_s", ())),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(
                    f"malformed request sample: {exc!r}",
                    location=Location(file=source, path=f"requests[{i}]"),
                    fix="pass an unmodified results.json",
                ) from None
        return out


@dataclass(frozen=True)
class BenchResults:
    """A results file as read: its kind and its runs (one for ``run``, the blocks for ``ab``)."""

    kind: ResultsKind
    runs: tuple[ResultsRun, ...]
    source: str


def looks_like_results(path: str | Path) -> bool:
    """Whether ``path`` is a bench results file (a JSON object of a known kind), read bounded;
    False for anything else (a log, JSON lines, an unreadable path)."""
    try:
        head = read_bytes(path, what="bench results", head=_SNIFF_BYTES)
    except InputError:
        return False
    if not head.lstrip().startswith(b"{"):
        return False
    try:
        text = read_text(path, what="bench results", limits=Limits.trace())
    except InputError:
        return False
    return is_results_text(text, str(path))


def is_results_text(text: str, source: str = "bench results") -> bool:
    """Whether ``text`` is a bench results document (what ``bench run --output`` may replace)."""
    try:
        doc = load_json(text, source, limits=Limits.trace(), constants=True)
    except InputError:
        return False  # JSONL (one object per line), or not JSON at all
    return isinstance(doc, dict) and doc.get("kind") in RESULTS_KINDS


def read_results(path: str | Path) -> BenchResults:
    """Read a ``tierctl bench run`` or ``bench ab`` results file.

    Raises:
        InputError: unreadable (bounded by :meth:`tierctl.readers.Limits.trace`), not JSON, or
            not a results document.
    """
    source = str(path)
    text = read_text(path, what="bench results", limits=Limits.trace())
    doc = load_json(text, source, limits=Limits.trace(), constants=True)
    if isinstance(doc, dict) and doc.get("kind") == "run" and isinstance(doc.get("run"), dict):
        return BenchResults("run", (_run(doc["run"], source, "run"),), source)
    if isinstance(doc, dict) and doc.get("kind") == "ab":
        blocks = [b for b in doc.get("blocks", []) if isinstance(b, dict)]
        return BenchResults(
            "ab", tuple(_run(b, source, f"blocks[{i}]") for i, b in enumerate(blocks)), source
        )
    raise InputError(
        "not a tierctl bench results file",
        location=Location(file=source),
        rule='a results.json of `tierctl bench run` ("kind": "run") or `bench ab` ("kind": "ab")',
        fix="pass the results.json that `tierctl bench run` (or `bench ab`) wrote into its "
        "output folder",
    )


def _run(run: dict[str, Any], source: str, where: str) -> ResultsRun:
    requests = run.get("requests", [])
    return ResultsRun(
        sent=_count(run, "sent", source, where),
        completed=_count(run, "completed", source, where),
        failed=_count(run, "failed", source, where),
        timed_out=_count(run, "timed_out", source, where),
        # Not a list: kept as one sample, which the reader then calls malformed.
        requests=tuple(requests) if isinstance(requests, list) else (requests,),
    )


def _count(run: dict[str, Any], key: str, source: str, where: str) -> int:
    """A run's count: absent or not a number reads 0 (as before); a number must be a count
    (``"failed": -Infinity`` was ``int(-inf)``, an OverflowError, in ``sim fit --from bench``).

    Raises:
        InputError: a non-finite, negative or fractional count, or one past 2**53.
    """
    value = run.get(key, 0)
    if not isinstance(value, int | float):
        return 0
    if not (math.isfinite(value) and 0 <= value <= 2**53 and value == int(value)):
        raise InputError(
            f"{key} is not a count: {value!r}",
            location=Location(file=source, path=f"{where}.{key}"),
            rule="a run's counts are whole numbers from 0 to 2**53",
            fix="pass an unmodified results.json",
        )
    return int(value)
