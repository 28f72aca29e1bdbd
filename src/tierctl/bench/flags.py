"""A workload built from command-line flags (``--burst``, ``--hammer-*``, ``--trace``, ...).

The CLI only collects the flags into :class:`WorkloadFlags`; turning them into a validated
:class:`~tierctl.bench.workload.BenchWorkload` (or overriding a workload file's settings with
them) happens here, so it is testable without click.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.bench.workload import (
    BenchWorkload,
    load_workload,
    parse_burst,
    parse_probe,
    workload_from_dict,
)
from tierctl.errors import InputError


@dataclass(frozen=True)
class WorkloadFlags:
    """The workload flags of ``tierctl bench run`` / ``bench ab``; ``None`` = not given."""

    workload_path: str | None = None
    burst: str | None = None
    output_tokens: int = 256
    hammer_rate: float | None = None
    hammer_constant: bool = False
    hammer_concurrency: int | None = None
    hammer_count: int = 100
    hammer_duration: float | None = None
    hammer_tokens: str = "64:16"
    trace_path: str | None = None
    trace_format: str = "jsonl"
    time_scale: float = 1.0
    api: str | None = None
    model: str | None = None
    seed: int | None = None
    timeout_s: float | None = None
    max_duration_s: float | None = None
    probe: str | None = None
    no_probe: bool = False


# The flags that make a lane, as errors name them (the CLI shows its option names).
_LANE_PARAMS = ("workload_path", "burst", "hammer_rate", "hammer_concurrency", "trace_path")


def workload_from_flags(flags: WorkloadFlags) -> BenchWorkload:
    """A workload file with flag overrides, or a workload made of lane flags.

    Raises:
        InputError: no load given, both a file and lane flags, or a bad flag value.
    """
    lanes = _lanes(flags)
    overrides = {
        k: getattr(flags, k)
        for k in ("api", "model", "seed", "timeout_s", "max_duration_s")
        if getattr(flags, k) is not None
    }
    if flags.workload_path:
        if lanes:
            raise InputError(
                "give either `workload_path` or lane flags "
                "(`burst`/`hammer_rate`/`hammer_concurrency`/`trace_path`)",
                fix="put every lane in the workload file",
                params=_LANE_PARAMS,
            )
        base: dict[str, Any] = load_workload(flags.workload_path).model_dump()
    elif lanes:
        base = {"name": "cli", "lanes": lanes}
    else:
        raise InputError(
            "no load given",
            fix="pass `workload_path` FILE, or `burst`, `hammer_rate`/`hammer_concurrency`, "
            "or `trace_path`",
            params=_LANE_PARAMS,
        )
    probe = dict(base.get("probe") or {})
    if flags.probe:
        probe.update(parse_probe(flags.probe))
    if flags.no_probe:
        probe["enabled"] = False
    return workload_from_dict(
        {**base, **overrides, "probe": probe}, source=flags.workload_path or "<flags>"
    )


def _lanes(flags: WorkloadFlags) -> list[dict[str, Any]]:
    lanes: list[dict[str, Any]] = []
    if flags.burst:
        count, tokens = parse_burst(flags.burst)
        lanes.append(
            {
                "kind": "burst",
                "count": count,
                "input_tokens": tokens,
                "output_tokens": flags.output_tokens,
            }
        )
    if flags.hammer_rate is not None or flags.hammer_concurrency is not None:
        inp, _, out = flags.hammer_tokens.partition(":")
        if not (inp.isdigit() and out.isdigit()):
            raise InputError(
                "`hammer_tokens` must be INPUT:OUTPUT",
                value=flags.hammer_tokens,
                fix="for example `hammer_tokens` 64:16",
                params=("hammer_tokens",),
            )
        lanes.append(
            {
                "kind": "hammer",
                "rate_rps": flags.hammer_rate,
                "concurrency": flags.hammer_concurrency,
                "arrival": "constant" if flags.hammer_constant else "poisson",
                "count": flags.hammer_count,
                "duration_s": flags.hammer_duration,
                "input_tokens": int(inp),
                "output_tokens": int(out),
            }
        )
    if flags.trace_path:
        lanes.append(
            {
                "kind": "trace",
                "path": str(Path(flags.trace_path).resolve()),
                "format": flags.trace_format,
                "time_scale": flags.time_scale,
            }
        )
    return lanes
