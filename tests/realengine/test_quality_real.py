"""The quality lane and arm health against real vLLM engines on CPU (the tiny Llama).

- the pair (same weights, float32): at the noise floor;
- one arm with ``--dtype bfloat16``: above the floor (its logprobs move, greedy tokens flip);
- that arm killed mid-run and started again: a restart, and the arm is unhealthy.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realengine.fixtures import START_TIMEOUT_S, EnginePair, extra_engine
from tierctl.bench.health import ArmTarget
from tierctl.bench.quality.check import check_quality, watched
from tierctl.bench.quality.lane import TEACHER_FORCED, run_quality
from tierctl.bench.quality.spec import QualitySpec, TeacherForcedSpec

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

# Small enough for a loaded 2-core machine (three passes of ~20 requests), large enough that
# bfloat16 flips greedy tokens on several texts. Generous per-request time-out.
SPEC = QualitySpec(
    teacher_forced=TeacherForcedSpec(count=16, tokens=48),
    arithmetic=6,
    max_tokens=8,
    engine="vllm",
    timeout_s=600.0,
)


@pytest.fixture(scope="module")
def bf16_engine(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """A third engine: the pair's flags plus ``--dtype bfloat16`` (the last --dtype wins)."""
    log = tmp_path_factory.mktemp("vllm-bf16") / "bf16.log"
    flags = ("--max-num-seqs", "8", "--dtype", "bfloat16")
    with extra_engine(vllm_python, tiny_model, log, flags, "bf16") as engine:
        yield engine


def test_same_weights_are_at_the_noise_floor(vllm_pair: EnginePair) -> None:
    a, b = vllm_pair.urls
    targets = [
        ArmTarget(arm, url, engine="vllm", log_path=vllm_pair.log(name))
        for arm, url, name in (("A", a, "r1"), ("B", b, "r2"))
    ]
    result, health = asyncio.run(check_quality(a, b, SPEC, targets=targets))
    assert result.errors == ()
    assert result.verdict == "at the noise floor", [lane.test for lane in result.lanes]
    tf = next(lane for lane in result.lanes if lane.lane == TEACHER_FORCED)
    assert tf.items == 16
    assert not tf.test.above
    # the whole text was scored: every position compared on both comparisons
    assert all(c.comparable and c.positions > 40 for c in tf.ab_texts)
    assert health.healthy, health.lines()
    assert all(h.fatal_lines == () for h in health.arms.values())
    assert all(h.sources == ("metrics",) for h in health.arms.values())  # vLLM exports it


def test_bfloat16_on_one_arm_is_above_the_floor(vllm_pair: EnginePair, bf16_engine: object) -> None:
    a = vllm_pair.urls[0]
    b = bf16_engine.url  # type: ignore[attr-defined]
    spec = SPEC.model_copy(update={"arithmetic": 0})
    result = asyncio.run(run_quality(a, b, spec))
    assert result.errors == ()
    tf = result.lanes[0]
    assert tf.lane == TEACHER_FORCED
    assert tf.test.above, tf.test
    assert tf.verdict == f"above the floor: {tf.test.differ} items differ"
    assert tf.test.differ > tf.test.floor
    assert tf.token_agreement["A-B"][0] < tf.token_agreement["A-A'"][0]
    assert tf.max_gap["A-B"][0] > tf.max_gap["A-A'"][0]
    assert result.verdict.startswith("above the floor")


def test_a_replica_killed_mid_run_is_a_restart_and_unhealthy(
    vllm_pair: EnginePair, bf16_engine: object, tmp_path: Path
) -> None:
    a = vllm_pair.urls[0]
    engine = bf16_engine
    b = engine.url  # type: ignore[attr-defined]
    pid_file = tmp_path / "b.pid"
    pid_file.write_text(str(engine.pid))  # type: ignore[attr-defined]
    spec = SPEC.model_copy(
        update={"arithmetic": 0, "teacher_forced": TeacherForcedSpec(count=4, tokens=32)}
    )

    async def run() -> object:
        first = await run_quality(a, b, spec.model_copy(update={"floor": False}))
        # the replica dies mid-run (SIGKILL to its whole process group) and is started again
        os.killpg(engine.pid, signal.SIGKILL)  # type: ignore[attr-defined]
        await asyncio.to_thread(engine.process.proc.wait, 60)  # type: ignore[attr-defined]
        engine.start()  # type: ignore[attr-defined]
        pid_file.write_text(str(engine.pid))  # type: ignore[attr-defined]
        await asyncio.to_thread(engine.wait_ready, START_TIMEOUT_S)  # type: ignore[attr-defined]
        await run_quality(a, b, spec.model_copy(update={"floor": False}))
        return first

    _, report = asyncio.run(
        watched(
            [ArmTarget("A", a), ArmTarget("B", b, pid_file=pid_file)],
            run,
            interval_s=2.0,
        )
    )
    assert report.arms["A"].healthy, report.lines()
    b_health = report.arms["B"]
    assert b_health.restarts == 1, report.lines()
    assert set(b_health.sources) == {"metrics", "pid"}
    assert not b_health.down_at_end
    assert not report.healthy  # what --fail-on-unhealthy exits 1 on
