"""metric_drift over one window: a family that stops is drift; one that only starts later is
how a fresh engine looks, unless another family of that arm stopped at the same time."""

from __future__ import annotations

from dataclasses import dataclass, field

from tierctl.engines import VLLM
from tierctl.engines.base import MetricRef
from tierctl.readout.analysis import Arm, metric_drift

ARMS = (Arm("r1", 'container_name="a"'), Arm("r2", 'container_name="b"'))
EARLY, LATE = [100.0, 200.0], [800.0, 900.0]


@dataclass
class _Series:
    labels: dict[str, str]
    times_s: list[float]


@dataclass
class _FakeQuery:
    """What metric_drift reads of the window: one range query per arm."""

    by_arm: dict[str, dict[str, list[float]]]
    engine: object = VLLM
    prefix: str = "vllm:"
    first: float = 0.0
    last: float = 1000.0
    asked: list[str] = field(default_factory=list)

    def range(self, expr: str) -> list[_Series]:
        self.asked.append(expr)
        arm = "r1" if 'container_name="a"' in expr else "r2"
        return [_Series({"__name__": n}, t) for n, t in self.by_arm[arm].items()]


FAMILY = "vllm:e2e_request_latency_seconds_bucket"


def _drift(r1: dict[str, list[float]], r2: dict[str, list[float]]) -> list[str]:
    families = [MetricRef("e2e_request_latency_seconds_bucket")]
    return metric_drift(_FakeQuery({"r1": r1, "r2": r2}), ARMS, families)  # type: ignore[arg-type]


def test_a_family_that_starts_late_on_a_fresh_engine_is_not_drift() -> None:
    both = {FAMILY: EARLY + LATE, "vllm:cache_config_info": EARLY + LATE}
    fresh = {FAMILY: LATE, "vllm:cache_config_info": EARLY + LATE}
    assert [d for d in _drift(both, fresh) if FAMILY in d] == []


def test_a_family_that_stops_is_drift() -> None:
    both = {FAMILY: EARLY + LATE}
    stopped = {FAMILY: EARLY, "vllm:other": EARLY + LATE}
    assert (
        f"{FAMILY} for r2 is present only in the first half of the window, absent in the second"
        in _drift(both, stopped)
    )


def test_a_family_that_starts_when_another_stops_is_a_rename() -> None:
    both = {FAMILY: EARLY + LATE}
    renamed = {FAMILY: LATE, "vllm:old_name_bucket": EARLY}
    lines = _drift(both, renamed)
    assert (
        f"{FAMILY} for r2 is present only in the second half of the window, absent in the "
        "first, where vllm:old_name_bucket stopped"
    ) in lines
