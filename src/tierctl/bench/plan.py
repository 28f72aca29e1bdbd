"""Turn a workload into a fixed, seeded request plan.

The plan is what makes a paired A/B fair: both arms get the same requests (index, lane, send
offset, prompt length, max_tokens) in the same order, and a prompt is derived from its index,
so the same request is byte-identical in both arms.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from tierctl.bench.workload import BenchWorkload, BurstLane, HammerLane, TraceLane
from tierctl.traces import read_trace


@dataclass(frozen=True)
class PlannedRequest:
    """One request the run will send."""

    index: int
    lane: str
    offset_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class LanePlan:
    """A lane's requests; ``concurrency`` set means a closed loop (offsets are the lane start)."""

    name: str
    kind: str
    requests: tuple[PlannedRequest, ...]
    concurrency: int | None = None
    stop_s: float | None = None


@dataclass(frozen=True)
class RequestPlan:
    """Every lane's requests, indexed 0..n-1 across lanes."""

    lanes: tuple[LanePlan, ...]

    @property
    def size(self) -> int:
        """Requests in the plan."""
        return sum(len(lane.requests) for lane in self.lanes)

    @property
    def max_input_tokens(self) -> int:
        """The longest prompt, in tokens."""
        return max((r.input_tokens for lane in self.lanes for r in lane.requests), default=0)


def plan_requests(workload: BenchWorkload) -> RequestPlan:
    """Expand every lane of ``workload`` into requests; deterministic for a given seed.

    Raises:
        InputError: a trace lane's file is unreadable or has a bad row.
    """
    rng = random.Random(workload.seed)
    lanes: list[LanePlan] = []
    next_index = 0
    for lane in workload.lanes:
        if isinstance(lane, BurstLane):
            reqs = [(lane.at_s, lane.input_tokens, lane.output_tokens) for _ in range(lane.count)]
            conc, stop = None, None
        elif isinstance(lane, HammerLane):
            reqs = _hammer(lane, rng)
            conc = lane.concurrency
            stop = lane.start_s + lane.duration_s if lane.duration_s else None
        else:
            reqs = _trace(lane, Path(workload.base_dir))
            conc, stop = None, None
        planned = tuple(
            PlannedRequest(next_index + i, lane.name, off, inp, out)
            for i, (off, inp, out) in enumerate(reqs)
        )
        next_index += len(planned)
        lanes.append(LanePlan(lane.name, lane.kind, planned, conc, stop))
    return RequestPlan(tuple(lanes))


def _hammer(lane: HammerLane, rng: random.Random) -> list[tuple[float, int, int]]:
    if lane.concurrency is not None:
        return [(lane.start_s, lane.input_tokens, lane.output_tokens)] * lane.count
    assert lane.rate_rps is not None
    out: list[tuple[float, int, int]] = []
    t = 0.0
    horizon = lane.duration_s if lane.duration_s is not None else float("inf")
    for _ in range(lane.count):
        if t >= horizon:
            break
        out.append((lane.start_s + t, lane.input_tokens, lane.output_tokens))
        t += rng.expovariate(lane.rate_rps) if lane.arrival == "poisson" else 1.0 / lane.rate_rps
    return out


def _trace(lane: TraceLane, base_dir: Path) -> list[tuple[float, int, int]]:
    path = Path(lane.path)
    if not path.is_absolute():
        path = base_dir / path
    rows = read_trace(path, lane.format, limit=lane.limit)
    out = []
    for row in rows:
        inp = min(row.input_tokens, lane.max_input_tokens or row.input_tokens)
        outp = min(row.output_tokens, lane.max_output_tokens or row.output_tokens)
        out.append((lane.start_s + row.arrival_s * lane.time_scale, inp, outp))
    return out
