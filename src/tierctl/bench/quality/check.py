"""One call for ``tierctl bench quality`` and the quality/health parts of ``bench ab``:
run the work with every arm's health watched, and judge both."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tierctl.bench.health import ArmTarget, HealthReport, HealthWatch, count_queue_full
from tierctl.bench.quality.lane import QualityResult, run_quality
from tierctl.bench.quality.spec import QualitySpec
from tierctl.engines import default_profile, profile_for

T = TypeVar("T")


async def watched(
    targets: Sequence[ArmTarget],
    work: Callable[[], Awaitable[T]],
    *,
    interval_s: float = 5.0,
    queue_full: Callable[[T], dict[str, int]] | None = None,
) -> tuple[T, HealthReport]:
    """Run ``work()`` while sampling each arm's health; the result and the health report.

    With no targets the report is empty (and healthy)."""
    if not targets:
        return await work(), HealthReport()
    watch = HealthWatch(targets, interval_s=interval_s)
    await watch.start()
    try:
        result = await work()
    finally:
        arms = await watch.stop()
    if queue_full is not None:
        counts = queue_full(result)
        arms = {a: dataclasses.replace(h, queue_full=counts.get(a, 0)) for a, h in arms.items()}
    return result, HealthReport(arms)


def ab_queue_full(run: tuple[Any, QualityResult | None]) -> dict[str, int]:
    """Queue-full rejections per arm over a ``bench ab`` run: latency blocks and quality."""
    ab, quality = run
    out = quality_queue_full(quality) if quality is not None else {"A": 0, "B": 0}
    for block in ab.blocks:
        bad = [(r.http_status, r.error) for r in block.record.requests if r.outcome != "completed"]
        # the engine is not known per block here; both engines' texts say "queue is full"
        out[block.arm] = out.get(block.arm, 0) + count_queue_full(bad, "queue is full")
    return out


def quality_queue_full(result: QualityResult) -> dict[str, int]:
    """Queue-full rejections per arm among the quality lane's failed requests."""
    out: dict[str, int] = {}
    for arm in ("A", "B"):
        kind = result.engines.get(arm)
        engine = profile_for(kind) if kind else default_profile()
        errs = [(None, e) for e in result.errors if e.split(" ", 1)[0] in ((arm, arm + "'"))]
        out[arm] = count_queue_full(errs, engine.queue_full_text)
    return out


async def check_quality(
    a_url: str,
    b_url: str,
    spec: QualitySpec,
    *,
    targets: Sequence[ArmTarget] = (),
    base_dir: str | Path = ".",
    model: str | None = None,
    on_item: Callable[[str, str], None] | None = None,
    health_interval_s: float = 5.0,
) -> tuple[QualityResult, HealthReport]:
    """The quality lane between two arms, with their health watched over it."""
    return await watched(
        targets,
        lambda: run_quality(a_url, b_url, spec, base_dir=base_dir, model=model, on_item=on_item),
        interval_s=health_interval_s,
        queue_full=quality_queue_full,
    )
