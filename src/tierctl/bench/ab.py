"""Paired A/B between two endpoints: the same requests, counterbalanced order, repetitions.

Each repetition runs the plan once per letter of ``order`` (default ``ABBA``), against A or B,
one block after the other, so slow drift (thermal, cache warm-up, a neighbour's load) hits both
arms alike. Each block's prompts lead with that block's own tokens
(:func:`tierctl.bench.prompts.scoped`), so no block is served from the prefix cache an earlier
block of its arm filled: with the same prompts in every block, vLLM (prefix caching on by
default) served all but an arm's first block from cache, and the ratio measured the cache.
Optionally the arm's prefix cache is also flushed before every block, at the endpoint its
engine profile names (SGLang's ``/flush_cache``, vLLM's ``/reset_prefix_cache``); a flush
that is refused is reported as a warning. Within a repetition the k-th A block is paired with
the k-th B block; ratios B/A and their intervals come from :mod:`tierctl.bench.bootstrap` over
those pairs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
import numpy as np

from tierctl.bench.bootstrap import Ratio, paired_ratio
from tierctl.bench.plan import RequestPlan, plan_requests
from tierctl.bench.prompts import PromptSource, scoped
from tierctl.bench.runner import Progress, resolve_model, run_plan
from tierctl.bench.samples import RunRecord
from tierctl.bench.summary import METRICS, busy_span_s
from tierctl.bench.workload import BenchWorkload
from tierctl.credentials import mask_userinfo
from tierctl.engines import PROFILES, EngineProfile, engine_at_async
from tierctl.errors import InputError
from tierctl.latency import percentile
from tierctl.quantity import Change, Quantity, judge_counts, judge_ratio


@dataclass(frozen=True)
class Block:
    """One run of the plan against one arm."""

    repetition: int
    position: int
    arm: str
    record: RunRecord
    flush: str | None = None  # "ok", "unsupported (HTTP 404)", ... or None when not asked


@dataclass(frozen=True)
class ABResult:
    """Every block of a paired A/B, in the order they ran."""

    a_url: str
    b_url: str
    order: str
    repetitions: int
    blocks: tuple[Block, ...]
    interrupted: bool
    #: What the caller must hear: a cache flush asked for and refused, prompts shared.
    warnings: tuple[str, ...] = ()

    def pairs(self) -> list[tuple[Block, Block]]:
        """(A block, B block) pairs: the k-th of each arm within one repetition."""
        out: list[tuple[Block, Block]] = []
        for rep in sorted({b.repetition for b in self.blocks}):
            arms = [b for b in self.blocks if b.repetition == rep]
            a = [b for b in arms if b.arm == "A" and not b.record.interrupted]
            bb = [b for b in arms if b.arm == "B" and not b.record.interrupted]
            out.extend(zip(a, bb, strict=False))
        return out


@dataclass(frozen=True)
class MetricRatio:
    """One cell of the A/B table: a metric of one lane (``None`` = all lanes)."""

    lane: str | None
    metric: str
    ratio: Ratio

    @property
    def quantity(self) -> Quantity:
        """What the metric measures (unit, direction)."""
        return METRICS[self.metric]

    @property
    def change(self) -> Change:
        """B against A: ``better``/``worse`` by the metric's direction (counts: B vs A; the
        rest: when the ratio's interval excludes 1), else ``same`` or ``unclear``."""
        q, r = self.quantity, self.ratio
        if q.is_count:
            return judge_counts(r.a, r.b, q.direction)
        return judge_ratio(r.ci_low, r.ci_high, q.direction)


def check_order(order: str) -> str:
    """Validate an arm order such as ``ABBA``; return it upper-cased.

    Raises:
        InputError: letters other than A/B, or an arm missing.
    """
    up = order.upper()
    if not up or set(up) - {"A", "B"} or up.count("A") == 0 or up.count("B") == 0:
        raise InputError(
            f"bad `order` {order!r}",
            rule="a sequence of the letters A and B containing both",
            value=order,
            fix="use ABBA (counterbalanced, the default), BAAB, AB or ABAB",
            params=("order",),
        )
    return up


async def arm_engine(base_url: str) -> EngineProfile | None:
    """The engine an arm runs, by the profiles' one rule (:mod:`tierctl.engines.detection`);
    None: unknown (then every engine's flush endpoint is tried)."""
    base = base_url.rstrip("/")
    async with aiohttp.ClientSession() as session:

        async def probe(path: str) -> str | None:
            try:
                async with asyncio.timeout(10), session.get(base + path) as resp:
                    return await resp.text() if resp.status == 200 else None
            except (aiohttp.ClientError, OSError, TimeoutError):
                return None

        return await engine_at_async(probe)


def flush_paths(engine: EngineProfile | None) -> tuple[str, ...]:
    """Where to ask for a prefix-cache flush: the engine's endpoint, or (engine unknown) every
    engine's, first answer wins."""
    engines = [engine] if engine is not None else list(PROFILES.values())
    return tuple(dict.fromkeys(e.flush_cache_path for e in engines if e.flush_cache_path))


async def flush_cache(base_url: str, engine: EngineProfile | None = None) -> str:
    """Ask the server to drop its prefix cache; say what happened (never raises)."""
    paths = flush_paths(engine)
    if not paths:
        return "unsupported (the engine has no flush endpoint)"
    status = ""
    for path in paths:
        try:
            async with (
                aiohttp.ClientSession() as session,
                asyncio.timeout(30),
                session.post(base_url.rstrip("/") + path) as resp,
            ):
                if resp.status < 300:
                    return "ok"
                status = f"unsupported (POST {path}: HTTP {resp.status})"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            status = f"failed (POST {path}: {type(exc).__name__})"
    return status


def flush_warnings(
    blocks: Sequence[Block], urls: dict[str, str], engines: dict[str, EngineProfile | None]
) -> list[str]:
    """One warning per arm whose cache flush was refused in some block."""
    out = []
    for arm in sorted(urls):
        refused = [b.flush for b in blocks if b.arm == arm and b.flush not in (None, "ok")]
        if not refused:
            continue
        total = sum(1 for b in blocks if b.arm == arm)
        engine = engines.get(arm)
        why = (
            f" ({engine.flush_cache_needs})"
            if engine is not None and engine.flush_cache_needs
            else ""
        )
        out.append(
            f"arm {arm} ({mask_userinfo(urls[arm])}): the prefix-cache flush asked for (`flush`) did not happen "
            f"in {len(refused)} of {total} block(s): {refused[-1]}{why}; each block's prompts "
            "lead with its own tokens, so no block was served from another's cached prefix"
        )
    return out


async def run_ab(
    a_url: str,
    b_url: str,
    workload: BenchWorkload,
    prompts: PromptSource,
    *,
    order: str = "ABBA",
    repetitions: int = 1,
    flush: bool = False,
    shared_prompts: bool = False,
    run_id: str | None = None,
    plan: RequestPlan | None = None,
    stop: asyncio.Event | None = None,
    on_block: Callable[[int, int, str], None] | None = None,
    progress: Progress | None = None,
) -> ABResult:
    """Run the paired A/B; a stop (or Ctrl-C) keeps every block run so far.

    ``on_block(k, total, arm)`` is called before each block. Each block's prompts lead with
    its own tokens unless ``shared_prompts`` (every block sends the same prompts: what a warm
    prefix cache does to them is then part of what is measured). The block's tokens name the
    run too (``run_id``, random by default), so a second A/B against the same warm engines is
    not served from the first one's cache either.
    """
    order = check_order(order)
    plan = plan or plan_requests(workload)
    stop = stop or asyncio.Event()
    urls = {"A": a_url, "B": b_url}
    models = {arm: await resolve_model(url, workload.model) for arm, url in urls.items()}
    engines = {arm: await arm_engine(url) for arm, url in urls.items()} if flush else {}
    run = run_id if run_id is not None else os.urandom(3).hex()
    blocks: list[Block] = []
    total = repetitions * len(order)
    interrupted = False
    for rep in range(repetitions):
        for pos, arm in enumerate(order):
            if stop.is_set():
                interrupted = True
                break
            if on_block is not None:
                on_block(len(blocks), total, arm)
            try:
                flushed = await flush_cache(urls[arm], engines.get(arm)) if flush else None
            except asyncio.CancelledError:
                _uncancel()
                interrupted = True
                break
            record = await run_plan(
                urls[arm],
                workload,
                plan,
                prompts
                if shared_prompts
                else scoped(prompts, f"Run {run} block {rep}.{pos} arm {arm}. "),
                label=arm,
                model=models[arm],
                stop=stop,
                progress=progress,
            )
            blocks.append(Block(rep, pos, arm, record, flushed))
            if record.interrupted:
                interrupted = True
                break
        if interrupted:
            break
    warnings = flush_warnings(blocks, urls, engines)
    if shared_prompts:
        warnings.append(
            "every block sent the same prompts (`shared_prompts`): blocks after an arm's first "
            "may be served from its prefix cache, and the ratios then measure that cache"
        )
    # The URLs are printed and written: a password in one never is.
    return ABResult(
        mask_userinfo(a_url),
        mask_userinfo(b_url),
        order,
        repetitions,
        tuple(blocks),
        interrupted,
        tuple(warnings),
    )


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


@dataclass(frozen=True)
class _BlockArrays:
    """Per-block, per-lane values, precomputed so each bootstrap draw only concatenates."""

    ttft: np.ndarray
    tpot: np.ndarray
    itl: np.ndarray
    e2e: np.ndarray
    sent: int
    completed: int
    probe_misses: int | None
    output_tokens: int = 0
    span_s: float = 0.0
    no_ttft: int = 0

    @classmethod
    def of(cls, record: RunRecord, lane: str | None) -> _BlockArrays:
        reqs = [r for r in record.requests if lane is None or r.lane == lane]
        done = [r for r in reqs if r.outcome == "completed"]
        ttft = [r.ttft_s for r in done if r.ttft_s is not None]
        return cls(
            ttft=np.array(ttft, dtype=float),
            tpot=np.array([t for t in (r.tpot_s for r in done) if t is not None], dtype=float),
            itl=np.array([g for r in done for g in r.itl_s], dtype=float),
            e2e=np.array([r.e2e_s for r in done], dtype=float),
            sent=len(reqs),
            completed=len(done),
            # Probes belong to the endpoint, not to a lane.
            probe_misses=sum(p.missed for p in record.probes) if lane is None else None,
            output_tokens=sum(r.output_tokens for r in done),
            span_s=busy_span_s(reqs),
            no_ttft=len(done) - len(ttft),
        )


_PCT: dict[str, tuple[str, float]] = {
    "ttft_p50_s": ("ttft", 50),
    "ttft_p95_s": ("ttft", 95),
    "ttft_p99_s": ("ttft", 99),
    "tpot_p50_s": ("tpot", 50),
    "tpot_p90_s": ("tpot", 90),
    "itl_p50_s": ("itl", 50),
    "itl_p90_s": ("itl", 90),
    "e2e_p50_s": ("e2e", 50),
}


def pooled_metric(name: str, blocks: Sequence[_BlockArrays]) -> float | None:
    """A metric of :data:`~tierctl.bench.summary.METRICS` over pooled blocks."""
    if name in _PCT:
        field, q = _PCT[name]
        return percentile(np.concatenate([getattr(b, field) for b in blocks]), q)
    sent = sum(b.sent for b in blocks)
    completed = sum(b.completed for b in blocks)
    if name == "completion_pct":
        return 100.0 * completed / sent if sent else None
    if name == "output_tok_per_s":
        # Pooled blocks ran one after the other: total tokens over total busy time.
        span = sum(b.span_s for b in blocks)
        return sum(b.output_tokens for b in blocks) / span if span > 0 else None
    if name == "errors":
        return float(sent - completed)
    if name == "no_ttft":
        return float(sum(b.no_ttft for b in blocks))
    if name == "probe_misses":
        misses = [b.probe_misses for b in blocks]
        return None if any(m is None for m in misses) else float(sum(m or 0 for m in misses))
    raise KeyError(name)


def compare_arms(result: ABResult, lanes: Sequence[str], *, seed: int = 0) -> list[MetricRatio]:
    """Every metric of :data:`~tierctl.bench.summary.METRICS`, for all lanes and each lane."""
    out: list[MetricRatio] = []
    for lane in [None, *lanes] if len(lanes) > 1 else [None]:
        pairs = [
            (_BlockArrays.of(a.record, lane), _BlockArrays.of(b.record, lane))
            for a, b in result.pairs()
        ]
        for name in METRICS:
            if name == "probe_misses" and lane is not None:
                continue

            def metric(blocks: Sequence[_BlockArrays], name: str = name) -> float | None:
                return pooled_metric(name, blocks)

            out.append(MetricRatio(lane, name, paired_ratio(pairs, metric, seed=seed)))
    return out
