"""Run the quality lane against two arms and compare them against the noise floor.

The arms are asked the same items in three passes: A, then B, then A again (A'), each pass
with ``concurrency`` requests in flight so batches form as they do under load. A vs A' is what
nondeterminism alone (batch composition, kernel choice) changes; A vs B is judged against it,
item by item (:func:`~tierctl.bench.quality.stats.floor_test`), and per-item correctness of A
and B by McNemar's exact test.

Logprob requests are built and read by the engine's profile (:mod:`tierctl.engines`): SGLang's
``/generate`` with ``return_logprob``, vLLM's ``prompt_logprobs``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tierctl.bench.quality.items import (
    TaskItem,
    TextItem,
    arithmetic,
    correct,
    extract,
    generated_texts,
    passkey,
    read_tasks,
    read_texts,
)
from tierctl.bench.quality.spec import QualitySpec
from tierctl.bench.quality.stats import (
    FloorTest,
    Interval,
    McNemar,
    cluster_bootstrap_rate,
    floor_test,
    mcnemar,
    wilson,
)
from tierctl.credentials import mask_userinfo
from tierctl.engines import (
    EngineProfile,
    LogprobShapeError,
    TokenScore,
    default_profile,
    engine_at_async,
    profile_for,
)

TEACHER_FORCED = "teacher-forced"


@dataclass(frozen=True)
class Scored:
    """One text scored on one arm: per position the token, its logprob and the top token."""

    scores: tuple[TokenScore, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Answer:
    """One task answered by one arm: the greedy output."""

    output: str | None = None
    error: str | None = None


@dataclass
class ArmPass:
    """Everything one pass over the items got from one arm."""

    arm: str  # "A", "B" or "A'"
    url: str
    scored: dict[str, Scored] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)


@dataclass(frozen=True)
class TextComparison:
    """Two passes' scores of one text, compared position by position."""

    item: str
    positions: int
    agree: int  # positions whose top tokens are equal
    max_gap: float  # largest |logprob difference| of the text's own token
    max_gap_at: int  # its position (1-based token index), -1 when none
    mean_gap: float
    comparable: bool  # same token sequence and no error on either side
    error: str | None = None

    @property
    def differs(self) -> bool:
        """Any greedy token differs, or the texts could not be compared."""
        return not self.comparable or self.agree < self.positions


@dataclass(frozen=True)
class TaskComparison:
    """One task item on A and another pass: outputs, extracted answers, correctness."""

    item: str
    answer: str
    a_output: str | None
    x_output: str | None
    a_correct: bool
    x_correct: bool
    error: str | None = None

    @property
    def differs(self) -> bool:
        """The greedy outputs differ (or one side failed)."""
        return self.error is not None or self.a_output != self.x_output


@dataclass(frozen=True)
class LaneResult:
    """One lane's A-B comparison against its A-A' floor."""

    lane: str
    kind: str  # "texts" or "tasks"
    items: int
    test: FloorTest
    ab_texts: tuple[TextComparison, ...] = ()
    floor_texts: tuple[TextComparison, ...] = ()
    ab_tasks: tuple[TaskComparison, ...] = ()
    floor_tasks: tuple[TaskComparison, ...] = ()
    accuracy: dict[str, Interval] = field(default_factory=dict)
    mcnemar: McNemar | None = None
    token_agreement: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    max_gap: dict[str, tuple[float, str, int]] = field(default_factory=dict)
    mean_gap: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """The floor test's verdict."""
        return self.test.verdict


@dataclass(frozen=True)
class QualityResult:
    """The quality lane's outcome: per-lane results and one verdict."""

    a_url: str
    b_url: str
    engines: dict[str, str]
    floor_measured: bool
    lanes: tuple[LaneResult, ...]
    passes: tuple[str, ...]
    errors: tuple[str, ...] = ()

    @property
    def above(self) -> list[LaneResult]:
        """Lanes where A vs B is above the noise floor."""
        return [lane for lane in self.lanes if lane.test.above]

    @property
    def verdict(self) -> str:
        """``at the noise floor`` or ``above the floor: N items differ`` (over every lane
        above it)."""
        above = self.above
        if not above:
            return "at the noise floor"
        n = sum(lane.test.differ for lane in above)
        where = ", ".join(lane.lane for lane in above)
        return f"above the floor: {n} items differ ({where})"


def build_items(
    spec: QualitySpec, base_dir: str | Path = "."
) -> tuple[list[TextItem], list[TaskItem]]:
    """The texts and task items a spec asks for."""
    base = Path(base_dir)
    tf = spec.teacher_forced
    if tf.path is not None:
        texts = read_texts(base / tf.path, tf.count or None)
    else:
        texts = generated_texts(tf.count, tf.tokens, spec.seed)
    tasks: list[TaskItem] = []
    if spec.passkey.lengths:
        tasks += passkey(list(spec.passkey.lengths), spec.passkey.per_length, spec.seed)
    if spec.arithmetic:
        tasks += arithmetic(spec.arithmetic, spec.seed)
    for t in spec.tasks:
        tasks += read_tasks(base / t.path, t.scoring, t.limit, t.name)
    return texts, tasks


async def detect_profile(session: aiohttp.ClientSession, url: str) -> EngineProfile:
    """The engine behind a URL, by the profiles' one rule (:mod:`tierctl.engines.detection`:
    its metric names, then an identity endpoint such as SGLang's ``/server_info``), else the
    default engine."""
    base = url.rstrip("/")

    async def probe(path: str) -> str | None:
        try:
            async with asyncio.timeout(15), session.get(base + path) as r:
                return await r.text() if r.status == 200 else None
        except (aiohttp.ClientError, OSError, TimeoutError):
            return None

    return await engine_at_async(probe) or default_profile()


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float
) -> tuple[Any, str | None]:
    try:
        async with asyncio.timeout(timeout_s), session.post(url, json=body) as r:
            text = await r.text()
            if r.status != 200:
                return None, f"HTTP {r.status}: {text[:200]}"
            try:
                return json.loads(text), None
            except ValueError:
                return None, "answer is not JSON"
    except TimeoutError:
        return None, f"no answer in {timeout_s:g} s"
    except (aiohttp.ClientError, OSError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


async def run_pass(
    arm: str,
    url: str,
    profile: EngineProfile,
    model: str,
    texts: Sequence[TextItem],
    tasks: Sequence[TaskItem],
    spec: QualitySpec,
    *,
    on_item: Callable[[str, str], None] | None = None,
) -> ArmPass:
    """Ask one arm every item, ``spec.concurrency`` at a time."""
    out = ArmPass(arm, url)
    base = url.rstrip("/")
    sem = asyncio.Semaphore(spec.concurrency)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def score(item: TextItem) -> None:
            path, body = profile.prompt_logprobs_request(model, item.text)
            async with sem:
                data, err = await _post(session, base + path, body, spec.timeout_s)
            if err is None:
                try:
                    out.scored[item.id] = Scored(tuple(profile.parse_prompt_logprobs(data)))
                except LogprobShapeError as exc:
                    out.scored[item.id] = Scored(error=str(exc))
            else:
                out.scored[item.id] = Scored(error=err)
            if on_item is not None:
                on_item(arm, item.id)

        async def answer(item: TaskItem) -> None:
            body = {
                "model": model,
                "prompt": item.prompt,
                "max_tokens": spec.max_tokens,
                "temperature": 0.0,
            }
            async with sem:
                data, err = await _post(session, base + "/v1/completions", body, spec.timeout_s)
            if err is None:
                try:
                    out.answers[item.id] = Answer(str(data["choices"][0]["text"]))
                except (KeyError, IndexError, TypeError):
                    out.answers[item.id] = Answer(error="no choices[0].text in the answer")
            else:
                out.answers[item.id] = Answer(error=err)
            if on_item is not None:
                on_item(arm, item.id)

        await asyncio.gather(*(score(t) for t in texts), *(answer(t) for t in tasks))
    return out


def compare_text(item: str, a: Scored, x: Scored) -> TextComparison:
    """Position-by-position comparison of one text's scores on two passes."""
    err = a.error or x.error
    if err is not None:
        return TextComparison(item, 0, 0, 0.0, -1, 0.0, False, err)
    if [s.token for s in a.scores] != [s.token for s in x.scores]:
        return TextComparison(
            item, len(a.scores), 0, 0.0, -1, 0.0, False, "the arms tokenized the text differently"
        )
    agree = sum(1 for p, q in zip(a.scores, x.scores, strict=True) if p.top == q.top)
    gaps = [abs(p.logprob - q.logprob) for p, q in zip(a.scores, x.scores, strict=True)]
    if not gaps:
        return TextComparison(item, 0, 0, 0.0, -1, 0.0, True)
    at = max(range(len(gaps)), key=gaps.__getitem__)
    return TextComparison(item, len(gaps), agree, gaps[at], at + 1, sum(gaps) / len(gaps), True)


def compare_task(item: TaskItem, a: Answer, x: Answer) -> TaskComparison:
    """One task item on two passes."""
    return TaskComparison(
        item.id,
        item.answer,
        a.output,
        x.output,
        correct(item, a.output),
        correct(item, x.output),
        a.error or x.error,
    )


def _text_lane(
    texts: Sequence[TextItem], a: ArmPass, b: ArmPass, a2: ArmPass | None, spec: QualitySpec
) -> LaneResult:
    ab = tuple(compare_text(t.id, a.scored[t.id], b.scored[t.id]) for t in texts)
    fl = (
        tuple(compare_text(t.id, a.scored[t.id], a2.scored[t.id]) for t in texts)
        if a2 is not None
        else ()
    )
    test = floor_test(
        [c.differs for c in ab], [c.differs for c in fl] if fl else [False] * len(ab), spec.alpha
    )
    agreement: dict[str, tuple[float, float, float]] = {}
    max_gap: dict[str, tuple[float, str, int]] = {}
    mean_gap: dict[str, float] = {}
    for name, comps in (("A-B", ab), ("A-A'", fl)):
        usable = [c for c in comps if c.comparable]
        if not usable:
            continue
        agreement[name] = cluster_bootstrap_rate(
            [c.agree for c in usable], [c.positions for c in usable], seed=spec.seed
        )
        worst = max(usable, key=lambda c: c.max_gap)
        max_gap[name] = (worst.max_gap, worst.item, worst.max_gap_at)
        total = sum(c.positions for c in usable)
        mean_gap[name] = sum(c.mean_gap * c.positions for c in usable) / total if total else 0.0
    return LaneResult(
        lane=TEACHER_FORCED,
        kind="texts",
        items=len(texts),
        test=test,
        ab_texts=ab,
        floor_texts=fl,
        token_agreement=agreement,
        max_gap=max_gap,
        mean_gap=mean_gap,
    )


def _task_lane(
    lane: str,
    items: Sequence[TaskItem],
    a: ArmPass,
    b: ArmPass,
    a2: ArmPass | None,
    spec: QualitySpec,
) -> LaneResult:
    ab = tuple(compare_task(t, a.answers[t.id], b.answers[t.id]) for t in items)
    fl = (
        tuple(compare_task(t, a.answers[t.id], a2.answers[t.id]) for t in items)
        if a2 is not None
        else ()
    )
    test = floor_test(
        [c.differs for c in ab], [c.differs for c in fl] if fl else [False] * len(ab), spec.alpha
    )
    acc = {
        "A": wilson(sum(c.a_correct for c in ab), len(ab)),
        "B": wilson(sum(c.x_correct for c in ab), len(ab)),
    }
    if fl:
        acc["A'"] = wilson(sum(c.x_correct for c in fl), len(fl))
    return LaneResult(
        lane=lane,
        kind="tasks",
        items=len(items),
        test=test,
        ab_tasks=ab,
        floor_tasks=fl,
        accuracy=acc,
        mcnemar=mcnemar([c.a_correct for c in ab], [c.x_correct for c in ab]),
    )


async def run_quality(
    a_url: str,
    b_url: str,
    spec: QualitySpec,
    *,
    base_dir: str | Path = ".",
    model: str | None = None,
    on_item: Callable[[str, str], None] | None = None,
) -> QualityResult:
    """Ask A, B and (with ``spec.floor``) A again every item; compare per lane.

    ``on_item(arm, item_id)`` is called as each answer arrives (progress bars).
    """
    from tierctl.bench.runner import resolve_model

    texts, tasks = build_items(spec, base_dir)
    urls = {"A": a_url, "B": b_url}
    profiles: dict[str, EngineProfile] = {}
    for arm, url in urls.items():
        if spec.engine == "auto":
            async with aiohttp.ClientSession() as session:
                profiles[arm] = await detect_profile(session, url)
        else:
            profiles[arm] = profile_for(spec.engine)
    models = {arm: await resolve_model(url, model) for arm, url in urls.items()}

    async def one(arm: str, url: str, key: str) -> ArmPass:
        return await run_pass(
            arm, url, profiles[key], models[key], texts, tasks, spec, on_item=on_item
        )

    a = await one("A", a_url, "A")
    b = await one("B", b_url, "B")
    a2 = await one("A'", a_url, "A") if spec.floor else None
    lanes: list[LaneResult] = []
    if texts:
        lanes.append(_text_lane(texts, a, b, a2, spec))
    for lane in dict.fromkeys(t.lane for t in tasks):
        lanes.append(_task_lane(lane, [t for t in tasks if t.lane == lane], a, b, a2, spec))
    errors: list[str] = []
    for p in (a, b, *([a2] if a2 else [])):
        errors += [f"{p.arm} {k}: {v.error}" for k, v in p.scored.items() if v.error]
        errors += [f"{p.arm} {k}: {v.error}" for k, v in p.answers.items() if v.error]
    return QualityResult(
        a_url=mask_userinfo(a_url),
        b_url=mask_userinfo(b_url),
        engines={arm: p.kind for arm, p in profiles.items()},
        floor_measured=a2 is not None,
        lanes=tuple(lanes),
        passes=("A", "B", *(("A'",) if a2 else ())),
        errors=tuple(errors),
    )


def extracted(item: TaskItem, output: str | None) -> str | None:
    """The answer an output gives for an item (for reports)."""
    return None if output is None else extract(output, item.scoring)
