"""The workload file: what load to send, seeded and reproducible.

A workload is a small YAML file (or the same object built from CLI flags) holding one or more
*lanes* that run together: ``burst`` (N prompts at once), ``hammer`` (short requests at a rate
or a fixed concurrency) and ``trace`` (a replayed trace). Errors point at the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tierctl.bench.quality.spec import QualitySpec
from tierctl.errors import InputError, Location
from tierctl.readers import LineMap, load_yaml, read_text
from tierctl.traces import TraceFormat


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BurstLane(_Model):
    """N prompts sent at the same instant."""

    kind: Literal["burst"] = Field(description="Lane kind.")
    name: str = Field("burst", description="Lane name used in reports.")
    count: int = Field(ge=1, le=100_000, description="Prompts in the burst.")
    input_tokens: int = Field(ge=1, description="Prompt length in tokens.")
    output_tokens: int = Field(ge=1, description="max_tokens of each request.")
    at_s: float = Field(0.0, ge=0, description="When the burst starts, from run start.")


class HammerLane(_Model):
    """Short requests at a rate (Poisson or constant) or at a fixed concurrency."""

    kind: Literal["hammer"] = Field(description="Lane kind.")
    name: str = Field("hammer", description="Lane name used in reports.")
    rate_rps: float | None = Field(None, gt=0, description="Arrival rate, requests/s.")
    arrival: Literal["poisson", "constant"] = Field("poisson", description="Arrival process.")
    concurrency: int | None = Field(
        None, ge=1, le=10_000, description="Closed loop: requests in flight at all times."
    )
    count: int = Field(ge=1, le=10_000_000, description="Requests to send at most.")
    duration_s: float | None = Field(
        None, gt=0, description="Stop issuing after this long (from the lane start)."
    )
    start_s: float = Field(0.0, ge=0, description="When the lane starts, from run start.")
    input_tokens: int = Field(ge=1, description="Prompt length in tokens.")
    output_tokens: int = Field(ge=1, description="max_tokens of each request.")

    @model_validator(mode="after")
    def _one_mode(self) -> HammerLane:
        if (self.rate_rps is None) == (self.concurrency is None):
            raise ValueError(
                "give exactly one of rate_rps (open loop) or concurrency (closed loop)"
            )
        return self


class TraceLane(_Model):
    """Replay of a recorded trace with its arrival times."""

    kind: Literal["trace"] = Field(description="Lane kind.")
    name: str = Field("trace", description="Lane name used in reports.")
    path: str = Field(description="Trace file, relative to the workload file.")
    format: TraceFormat = Field("jsonl", description="Trace format.")
    time_scale: float = Field(
        1.0, gt=0, description="Multiply inter-arrival times by this (0.5 = twice as fast)."
    )
    max_input_tokens: int | None = Field(None, ge=1, description="Clip prompt lengths to this.")
    max_output_tokens: int | None = Field(None, ge=1, description="Clip max_tokens to this.")
    limit: int | None = Field(None, ge=1, description="Replay only the first N rows.")
    start_s: float = Field(0.0, ge=0, description="When the replay starts, from run start.")


Lane = Annotated[BurstLane | HammerLane | TraceLane, Field(discriminator="kind")]


class ProbeSpec(_Model):
    """The liveness probe lane that runs beside every workload."""

    enabled: bool = Field(True, description="Run the probe lane.")
    path: str = Field("/health", description="Path probed with GET.")
    interval_s: float = Field(1.0, gt=0, description="Time between probe sends.")
    timeout_s: float = Field(3.0, gt=0, description="A probe slower than this is a miss.")
    unhealthy_after: int = Field(
        3, ge=1, description="Consecutive misses after which a proxy marks the backend unhealthy."
    )


class BenchWorkload(_Model):
    """One workload: lanes that run together, the request shape and the probe lane."""

    name: str = Field("workload", description="Workload name used in reports.")
    seed: int = Field(0, description="Seed of every random choice (arrivals, prompts).")
    api: Literal["chat", "completions"] = Field("chat", description="OpenAI API to call.")
    model: str | None = Field(None, description="Model name; default: first of /v1/models.")
    ignore_eos: bool = Field(True, description="Ask the server to generate max_tokens exactly.")
    timeout_s: float = Field(600.0, gt=0, description="Per-request timeout.")
    max_duration_s: float = Field(
        3600.0, gt=0, description="Hard bound on the run's wall time; unsent requests are dropped."
    )
    lanes: tuple[Lane, ...] = Field(min_length=1, description="Load lanes, run together.")
    probe: ProbeSpec = Field(default_factory=ProbeSpec, description="Probe lane settings.")
    quality: QualitySpec | None = Field(
        None, description="The quality lane bench ab runs after the latency blocks (see "
        "docs/quality.md).",
    )  # fmt: skip
    base_dir: str = Field(".", description="Directory trace paths are relative to (set on load).")

    @field_validator("lanes")
    @classmethod
    def _unique_lane_names(cls, lanes: tuple[Lane, ...]) -> tuple[Lane, ...]:
        names = [lane.name for lane in lanes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"lane names must be unique; repeated: {', '.join(dupes)}")
        return lanes


def load_workload(path: str | Path) -> BenchWorkload:
    """Read and validate a workload YAML file.

    Raises:
        InputError: the file is missing, not YAML, or breaks the schema (located by line).
    """
    file = Path(path)
    text = read_text(file, what="workload")
    doc = load_yaml(text, str(file))
    data = doc.data
    if not isinstance(data, dict):
        raise InputError(
            "a workload file must be a mapping with a `lanes` list",
            location=Location(file=str(file), line=1),
            value=type(data).__name__,
        )
    try:
        wl = BenchWorkload.model_validate({**_plain(data), "base_dir": str(file.parent)})
    except ValidationError as exc:
        raise _located(exc, doc.lines, str(file)) from None
    return wl


def workload_from_dict(data: dict[str, Any], *, source: str = "<flags>") -> BenchWorkload:
    """Validate a workload built in code or from CLI flags.

    Raises:
        InputError: the values break the schema.
    """
    try:
        return BenchWorkload.model_validate(data)
    except ValidationError as exc:
        raise _located(exc, None, source) from None


def _located(exc: ValidationError, lines: LineMap | None, file: str) -> InputError:
    err = exc.errors()[0]
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p in _KIND_TAGS)]
    dotted = ".".join(str(p) for p in loc) or "<root>"
    extra = len(exc.errors()) - 1
    msg = err["msg"] + (f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else "")
    value = err.get("input") if err["type"] != "missing" else None
    if isinstance(value, dict | list):
        value = None  # a whole mapping is noise; the path says where it is
    return InputError(
        msg,
        location=Location(file=file, line=_line_of(lines, loc), path=dotted),
        rule="workload schema (see docs/bench.md)",
        value=value,
    )


_KIND_TAGS = ("burst", "hammer", "trace")


def _line_of(lines: LineMap | None, loc: list[Any]) -> int | None:
    """Best line number for a pydantic error location (the key's, or its nearest parent's)."""
    if lines is None:
        return None
    return lines.line(tuple(p if isinstance(p, int) else str(p) for p in loc)) or 1


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def parse_probe(text: str) -> dict[str, Any]:
    """Parse ``--probe PATH[@INTERVAL]`` (interval in seconds, ``s``/``ms`` suffix allowed).

    Raises:
        InputError: the path does not start with ``/`` or the interval is not positive.
    """
    path, at, interval = text.partition("@")
    out: dict[str, Any] = {"path": path}
    if not path.startswith("/"):
        raise InputError(
            "`probe` path must start with /",
            value=text,
            fix="for example `probe` /health@1s",
            params=("probe",),
        )
    if at:
        scale = 1.0
        raw = interval
        if raw.endswith("ms"):
            raw, scale = raw[:-2], 1e-3
        elif raw.endswith("s"):
            raw = raw[:-1]
        try:
            seconds = float(raw) * scale
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise InputError(
                "`probe` interval must be a positive duration",
                value=text,
                fix="for example `probe` /health@1s or `probe` /health@500ms",
                params=("probe",),
            )
        out["interval_s"] = seconds
    return out


def parse_burst(text: str) -> tuple[int, int]:
    """Parse ``--burst COUNTxTOKENS`` (e.g. ``8x20000``).

    Raises:
        InputError: not two positive integers joined by ``x``.
    """
    count, sep, tokens = text.lower().partition("x")
    if sep and count.isdigit() and tokens.isdigit() and int(count) > 0 and int(tokens) > 0:
        return int(count), int(tokens)
    raise InputError(
        "`burst` must be COUNTxTOKENS",
        value=text,
        fix="for example `burst` 8x20000",
        params=("burst",),
    )
