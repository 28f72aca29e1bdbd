"""Fitting a cost model to vLLM's iteration log (``tierctl sim fit --from vllm-log``).

vLLM 0.32's ``--enable-logging-iteration-details`` logs every step's context (prefill)
tokens, generation requests and the model's elapsed time; the step coefficients are fitted to
those (:func:`fit_iterations`), the log's missing shapes rebuilt by replaying it against the
same run's requests (:func:`replay_iterations`), and, given those requests' timings, the time
between steps that the log does not cover (scheduling, output processing, streaming) is
fitted as well (:func:`fit_overheads`). The log's grammar is the vLLM profile's.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierctl.engines import VLLM
from tierctl.errors import InputError, Location
from tierctl.readers import Limits, read_text
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.domain import StepDomain, domain_of
from tierctl.sim.lstsq import coordinate_search
from tierctl.sim.timing_fit import (
    log_residuals,
    timing_residuals,
    workload_of,
)


def read_log(path: Path) -> str:
    """An engine's log as text, bounded (:meth:`tierctl.readers.Limits.trace`), bad bytes
    replaced; a FIFO or device is refused, not read."""
    return read_text(path, what="engine log", limits=Limits.trace(), lenient=True)


@dataclasses.dataclass(frozen=True)
class IterationSample:
    """One engine step from vLLM's iteration log: its sizes and the model's elapsed time."""

    context_requests: int
    context_tokens: int
    generation_requests: int
    elapsed_s: float


def parse_vllm_iterations(text: str) -> list[IterationSample]:
    """Every non-dummy ``Iteration(N): ...`` line of a vLLM log, in order (the grammar is the
    vLLM profile's: :meth:`tierctl.engines.vllm.VLLMProfile.iteration_log_steps`)."""
    return [IterationSample(*step) for step in VLLM.iteration_log_steps(text)]


def read_vllm_iterations(path: str | Path) -> list[IterationSample]:
    """The steps vLLM logged with ``--enable-logging-iteration-details`` (0.32+).

    Raises:
        InputError: the file cannot be read or holds too few iteration lines.
    """
    p = Path(path)
    its = parse_vllm_iterations(read_log(p))
    _real_sizes(its, str(p))
    _enough_iterations(its, str(p))
    return its


#: The most requests or tokens one logged step may hold (a vLLM step's counts are int32s).
MAX_STEP_COUNT = 2**31


def _real_sizes(its: list[IterationSample], where: str) -> None:
    """Refuse a step no engine logs: a count past an int32 (a 200-digit token count made the
    fit's design matrix raise OverflowError, fresh sweep seed 2026120209 input 1013) or an
    elapsed time that is not a finite number of milliseconds."""
    for n, s in enumerate(its, 1):
        counts = (s.context_requests, s.context_tokens, s.generation_requests)
        if max(counts) > MAX_STEP_COUNT or not math.isfinite(s.elapsed_s):
            raise InputError(
                f"iteration line {n:,} logs a step no engine runs",
                location=Location(file=where),
                rule="a step's request and token counts are at most 2**31 "
                "and its elapsed time is finite",
                value=str(max(counts))[:40] if max(counts) > MAX_STEP_COUNT else s.elapsed_s,
                fix="fit on the log vLLM wrote, not an edited one",
            )


def _enough_iterations(its: list[IterationSample], where: str) -> None:
    pre = sum(1 for s in its if s.context_tokens > 0)
    if pre < 3 or len(its) - pre < 3:
        raise InputError(
            "too few vLLM iteration lines to fit the cost model",
            location=Location(file=where),
            rule="at least 3 steps with prefill tokens and 3 decode-only steps are needed",
            value={"prefill_steps": pre, "decode_steps": len(its) - pre},
            fix="start vLLM with --enable-logging-iteration-details and fit on the log of a run "
            "with varied prompt lengths and concurrency",
        )


def fit_iterations(
    its: list[IterationSample],
    base: CostModel,
    *,
    name: str,
    budget_tokens: int | None = None,
    requests: list[MeasuredRequest] | None = None,
) -> CostModel:
    """Fit the step coefficients to vLLM's logged step times.

    The simulator prices a vLLM step as ``prefill_base + b * c + g * c * (p + c/2) + d * rows
    + k * ctx`` when it prefills (``c`` new tokens on ``p`` already computed, ``rows`` decoding
    requests over ``ctx`` context tokens) and ``decode_base + d * rows + k * ctx`` when it only
    decodes, so one non-negative least squares over both kinds of step fits the six together
    (``d`` and ``k`` are shared). The log gives neither where a chunk starts in its prompt nor
    the decoders' context lengths; both are rebuilt:

    * with ``requests`` (the same run's requests, their prompt and output lengths), by
      replaying the log against them (:func:`replay_iterations`): every step's chunks and
      decoders are then known exactly;
    * without, from the token budget alone (:func:`chunk_positions`): a step whose one prefill
      filled ``budget_tokens`` was cut there; decode contexts stay unknown and ``k`` is zero.

    The elapsed time excludes scheduling and output handling, so ``round_overhead_s`` stays
    the base's until :func:`fit_overheads`.

    Raises:
        InputError: too few prefill or decode steps.
    """
    return fit_iteration_runs([(its, budget_tokens, requests)], base, name=name)


#: One logged run for a fit: its iterations, its engine's token budget, its requests (None:
#: shapes from the budget alone).
LoggedRun = tuple[list[IterationSample], int | None, list[MeasuredRequest] | None]


def runs_design(runs: Sequence[LoggedRun]) -> tuple[Any, Any]:
    """The design matrix and logged times of several runs, each replayed with its own budget
    and requests (engines at different budgets: a fit covering both arms' step shapes)."""
    import numpy as np

    xs, ys = [], []
    for its, budget, requests in runs:
        x, y = _design(iteration_shapes(its, budget, requests), its)
        xs.append(x)
        ys.append(y)
    return np.vstack(xs), np.concatenate(ys)


def fit_iteration_runs(runs: Sequence[LoggedRun], base: CostModel, *, name: str) -> CostModel:
    """:func:`fit_iterations` over the steps of several logged runs together.

    Raises:
        InputError: too few prefill or decode steps in all.
    """
    import numpy as np

    _enough_iterations([s for its, _, _ in runs for s in its], "iterations")
    x, y = runs_design(runs)
    coefs = _solve(x, y)
    a_p, b, attn, a_d, d, k_ctx, h_ctx = coefs
    # What the model leaves unexplained step by step: the robust spread (1.4826 MAD) of the
    # log ratios, which the simulator draws per step (CostModel.step_jitter).
    pred = x @ np.array(coefs)
    ok = (pred > 0) & (y > 0)
    logs = np.log(y[ok] / pred[ok])
    jitter = float(1.4826 * np.median(np.abs(logs - np.median(logs)))) if logs.size else 0.0
    # Drift only: each step shape's own median residual (prefill steps; decode steps per
    # batch size) is a misfit of the model, not host drift, and a fit trace plays its shapes
    # in stretches (the ladder, then each decode batch), so it is taken out first.
    kinds = [("p", 0.0) if row[0] else ("d", float(row[4])) for row in x[ok]]
    slow, block = slow_stretches(logs - _group_medians(logs, kinds))
    return dataclasses.replace(
        base,
        name=name,
        prefill_base_s=a_p,
        prefill_per_token_s=b,
        prefill_attn_pair_s=attn,
        decode_base_s=a_d,
        decode_per_seq_s=d,
        decode_per_ctx_token_s=k_ctx,
        prefill_per_ctx_token_s=h_ctx,
        step_jitter=jitter,
        step_jitter_slow=slow,
        step_jitter_block=block,
    )


def _group_medians(values: Any, keys: Sequence[tuple[str, float]]) -> Any:
    """Each value's group median (groups by ``keys``, one per value)."""
    import numpy as np

    out = np.zeros(len(values))
    for key in set(keys):
        idx = [i for i, k in enumerate(keys) if k == key]
        out[idx] = float(np.median(values[idx]))
    return out


def slow_stretches(logs: Any, block: int | None = None) -> tuple[float, int]:
    """The slow stretches in a fit's step residuals (``CostModel.step_jitter_slow`` and
    ``step_jitter_block``): the log residuals of consecutive steps, in blocks of ``block``
    (default ~sqrt(n), as the bootstrap's), have block means that spread more than
    independent per-step noise allows (its variance over the block length) when the host's
    speed drifts. The excess variance is the slow factor's; (0, 0) when there is none or
    fewer than 4 blocks."""
    import numpy as np

    r = np.asarray(logs, dtype=float)
    m = block or max(2, round(len(r) ** 0.5))
    n = len(r) // m
    if n < 4:
        return 0.0, 0
    blocks = r[: n * m].reshape(n, m)
    within = float(np.mean(np.var(blocks, axis=1, ddof=1)))
    between = float(np.var(blocks.mean(axis=1), ddof=1))
    excess = between - within / m
    return (float(excess**0.5), m) if excess > 1e-12 else (0.0, 0)


#: The seven step coefficients an iteration-log fit sets, in its design matrix's column order.
STEP_COEFFICIENTS = (
    "prefill_base_s",
    "prefill_per_token_s",
    "prefill_attn_pair_s",
    "decode_base_s",
    "decode_per_seq_s",
    "decode_per_ctx_token_s",
    "prefill_per_ctx_token_s",
)


def _design(shapes: list[StepShape], its: list[IterationSample]) -> tuple[Any, Any]:
    """The fit's design matrix (one row per step, :data:`STEP_COEFFICIENTS`' columns) and
    the logged times."""
    import numpy as np

    rows: list[list[float]] = []
    for sh in shapes:
        g, k = float(sh.decoders), float(sh.decode_context_tokens)
        if not sh.chunks:
            rows.append([0.0, 0.0, 0.0, 1.0, g, k, 0.0])
        else:
            c = sum(n for n, _ in sh.chunks)
            pairs = sum(n * (p + n / 2) for n, p in sh.chunks)
            depth = float(sum(p for _, p in sh.chunks))
            rows.append([1.0, float(c), pairs, 0.0, g, k, depth])
    return np.array(rows), np.array([s.elapsed_s for s in its])


def _log_refine(x: Any, y: Any, start: Any) -> Any:
    """The step coefficients refined to least squares of the log ratios (the maximum
    likelihood fit under the simulator's log-normal step jitter), from the relative fit's
    ``start``, each kept >= 0.

    Weighting by the logged time itself biases the fit low when steps are noisy (a slow
    step's error counts less than a fast one's: on a shared host the fitted decode step came
    out at 0.55x the median logged one). The simulator draws a step as the model's time
    times a log-normal of median 1, so the model should be the steps' median: least squares
    of the logs is that. ``start`` is returned when scipy is missing or the refit fails."""
    import numpy as np

    ok = y > 0
    x, y = x[ok], y[ok]
    scale = np.where(start > 0, start, np.maximum(np.median(y) / np.maximum(x.sum(0), 1e-30), 0))
    scale = np.where(scale > 0, scale, 1.0)
    ly = np.log(y)

    def fun(v: Any) -> Any:
        return np.log(np.maximum(x @ (v * scale), 1e-12)) - ly

    def jac(v: Any) -> Any:
        pred = np.maximum(x @ (v * scale), 1e-12)
        return x * scale / pred[:, None]

    try:
        from scipy.optimize import least_squares

        v0 = np.where(start > 0, 1.0, 1e-9)  # strictly inside the bounds
        fit = least_squares(
            fun, v0, jac=jac, bounds=(0.0, np.inf), max_nfev=200, ftol=1e-12, xtol=1e-12
        )
    except (ImportError, ValueError):  # pragma: no cover - scipy ships with the bench extra
        return start
    if not fit.success or float(np.sum(fit.fun**2)) >= float(np.sum(fun(v0) ** 2)):
        return start
    return fit.x * scale


def _solve(x: Any, y: Any) -> tuple[float, ...]:
    """Relative non-negative least squares of ``y`` on ``x``'s seven columns.

    Each row is weighted by its own time: a 5 ms decode step counts as much as a 150 ms
    chunk, as the figures compared later are relative errors; plain least squares would fit
    the chunks and leave short steps (TPOT) off by a quarter."""
    import numpy as np

    from tierctl.sim.lstsq import nnls_n

    # Columns no step exercises (no decode context known; no chunk deep in a prompt) are
    # left out and come back 0.
    used = [j for j in range(x.shape[1]) if j < 5 or x[:, j].any()]
    xu = x[:, used]
    w = 1.0 / np.maximum(y, 1e-6)
    got = nnls_n(xu * w[:, None], y * w)
    got = _log_refine(xu, y, np.asarray(got, dtype=float))
    out = [0.0] * x.shape[1]
    for j, v in zip(used, got, strict=True):
        out[j] = float(v)
    return tuple(out)


def bootstrap_iterations(
    its: list[IterationSample],
    budget_tokens: int | None,
    requests: list[MeasuredRequest] | None = None,
    *,
    samples: int = 40,
    seed: int = 0,
) -> list[dict[str, float]]:
    """The fit's own uncertainty: the six step coefficients refitted on ``samples``
    moving-block bootstrap resamples of the logged steps.

    Blocks (about the square root of the step count long) keep runs of consecutive steps
    together: a shared host's slow steps come in stretches, and resampling steps one by one
    would call the fit surer than it is.
    """
    return bootstrap_runs([(its, budget_tokens, requests)], samples=samples, seed=seed)


def bootstrap_runs(
    runs: Sequence[LoggedRun], *, samples: int = 40, seed: int = 0
) -> list[dict[str, float]]:
    """:func:`bootstrap_iterations` over the steps of several logged runs (in run order, so
    a block rarely spans two runs)."""
    from tierctl.sim.uncertainty import block_bootstrap

    x, y = runs_design(runs)
    out = []
    for idx in block_bootstrap(len(y), samples, seed):
        out.append(dict(zip(STEP_COEFFICIENTS, _solve(x[idx], y[idx]), strict=True)))
    return out


def iteration_domain(
    its: list[IterationSample],
    budget_tokens: int | None,
    requests: list[MeasuredRequest] | None = None,
) -> StepDomain:
    """The step shapes the log holds (what a model fitted on it knows)."""
    shapes = iteration_shapes(its, budget_tokens, requests)
    return domain_of((sh.chunks, sh.decoders, sh.decode_context_tokens) for sh in shapes)


@dataclasses.dataclass(frozen=True)
class StepShape:
    """What one logged step held: its prefill chunks and its decoders."""

    chunks: tuple[tuple[int, int], ...]  # (new tokens, tokens of the prompt already computed)
    decoders: int
    decode_context_tokens: int  # tokens the decoders attend to, summed


@dataclasses.dataclass
class _Replayed:
    prompt: int
    output: int
    index: int
    computed: int = 0
    generated: int = 0
    steps: list[int] = dataclasses.field(default_factory=list)  # where each token came from
    admitted_at: int = -1  # the step of its first chunk


def replay_iterations(
    its: list[IterationSample],
    requests: list[MeasuredRequest],
    budget_tokens: int | None = None,
) -> tuple[list[StepShape], int]:
    """Rebuild every logged step's chunks and decode contexts from the requests it served.

    vLLM's scheduler is first come, first served: a step decodes every running request that
    has its prompt computed, continues partly computed prompts in admission order, then admits
    waiting requests in arrival order, each taking what is left of its prompt up to the
    step's token budget. The step that computes a prompt's last token samples its first output
    token; a request leaves after its last. Replaying the log's own counts against the
    requests' lengths (in send order) gives each step's chunk positions and the decoders'
    context. A request admitted with fewer tokens than its prompt, in a step that did not fill
    ``budget_tokens``, found the rest in the prefix cache: its chunk starts after the cached
    part. Returns the shapes and how many steps disagreed with the replay (a count of
    decoders or prompt tokens that does not match: other traffic in the log, or a request
    that stopped early); the shapes of disagreeing steps fall back to the log's own counts.
    """
    shapes, mismatches, _ = _replay(its, requests, budget_tokens)
    return shapes, mismatches


def _replay(
    its: list[IterationSample], requests: list[MeasuredRequest], budget_tokens: int | None
) -> tuple[list[StepShape], int, list[_Replayed]]:
    """:func:`replay_iterations`, plus each request's replay: where its first chunk ran and
    the step each of its tokens came from."""
    from collections import deque

    replayed = [
        _Replayed(max(1, m.input_tokens), max(1, m.output_tokens), i)
        for i, m in enumerate(requests)
    ]
    waiting = deque(sorted(replayed, key=lambda r: requests[r.index].sent_s))
    running: list[_Replayed] = []
    shapes: list[StepShape] = []
    mismatches = 0
    for j, s in enumerate(its):
        decoders = [r for r in running if r.computed >= r.prompt]
        partial = [r for r in running if r.computed < r.prompt]
        ok = len(decoders) == s.generation_requests
        context = sum(r.prompt + r.generated for r in decoders)
        served = partial[: s.context_requests]
        new_tokens = s.context_tokens - sum(
            min(r.prompt - r.computed, s.context_tokens) for r in served
        )
        admitted = _admitted(waiting, s.context_requests - len(served), new_tokens)
        if admitted is None:
            ok = False
            admitted = []
        for r in admitted:
            waiting.remove(r)
            running.append(r)
            r.admitted_at = j
        if admitted and s.context_tokens > 0:
            last = admitted[-1]
            cut = budget_tokens is not None and (
                s.context_tokens + s.generation_requests >= budget_tokens
            )
            rest = new_tokens - sum(r.prompt for r in admitted[:-1])  # the last one's chunk
            if not cut and 0 < rest < last.prompt:
                last.computed = last.prompt - rest  # a prefix-cache hit
        left, chunks = s.context_tokens, []
        for r in (*served, *admitted):
            take = min(r.prompt - r.computed, left)
            chunks.append((take, r.computed))
            r.computed += take
            left -= take
            if r.computed >= r.prompt:
                r.generated = 1
                r.steps.append(j)
        ok = ok and left == 0
        for r in decoders:
            r.generated += 1
            r.steps.append(j)
        running = [r for r in running if r.computed < r.prompt or r.generated < r.output]
        if ok:
            shapes.append(StepShape(tuple(chunks), len(decoders), context))
        else:
            mismatches += 1
            shapes.append(_counted_shape(s, 0))
    return shapes, mismatches, replayed


# How far into the waiting queue the replay looks for the requests a step admitted: the API
# server can hand two requests sent within a millisecond to the engine in either order.
_REORDER_WINDOW = 4


def _admitted(waiting: Any, count: int, tokens: int) -> list[_Replayed] | None:
    """The ``count`` waiting requests a step admitted with ``tokens`` prompt tokens between
    them: the first in queue order whose lengths add up (all but the last admitted whole, the
    last cut by the budget), looking ``_REORDER_WINDOW`` deep; None when none fit."""
    from itertools import permutations

    if count <= 0:
        return [] if tokens == 0 else None
    window = list(itertools.islice(waiting, max(_REORDER_WINDOW, count + _REORDER_WINDOW)))
    if len(window) < count:
        return None
    combos: Any
    if count <= _REORDER_WINDOW:
        combos = permutations(window[:_REORDER_WINDOW], count)
    else:
        # A step that admits more requests than the window (a batch arriving together at a
        # large budget): the queue's first ones, the last of them possibly handed on later.
        head = tuple(window[: count - 1])
        combos = ((*head, r) for r in window[count - 1 :])
    for combo in combos:
        whole = sum(r.prompt for r in combo[:-1])
        rest = tokens - whole
        if 0 < rest <= combo[-1].prompt:
            return list(combo)
    return None


def _explained(
    its: list[IterationSample], requests: list[MeasuredRequest], budget_tokens: int | None
) -> tuple[list[StepShape], list[_Replayed]] | None:
    """The replay, when the requests explain the log: at most one step in twenty disagreeing
    (more is other traffic in the log, or the wrong timings file)."""
    shapes, bad, replayed = _replay(its, requests, budget_tokens)
    return (shapes, replayed) if bad * 20 <= len(its) else None


def _emitted(steps: int, replayed: list[_Replayed]) -> list[int]:
    """Tokens each step emitted, from the replay."""
    out = [0] * steps
    for r in replayed:
        for j in r.steps:
            out[j] += 1
    return out


def _counted_shape(s: IterationSample, position: int) -> StepShape:
    chunks = ((s.context_tokens, position),) if s.context_tokens else ()
    return StepShape(chunks, s.generation_requests, 0)


def iteration_shapes(
    its: list[IterationSample],
    budget_tokens: int | None,
    requests: list[MeasuredRequest] | None = None,
) -> list[StepShape]:
    """Each step's shape: replayed against ``requests`` when they explain the log (at most one
    step in twenty disagreeing), else rebuilt from the token budget (no decode contexts)."""
    explained = _explained(its, requests, budget_tokens) if requests else None
    if explained is not None:
        return explained[0]
    return [
        _counted_shape(s, p) for s, p in zip(its, chunk_positions(its, budget_tokens), strict=True)
    ]


def chunk_positions(its: list[IterationSample], budget_tokens: int | None) -> list[int]:
    """Where each step's prefill starts in its prompt (0 for decode steps), rebuilt from the
    schedule: a lone prefill that filled the budget was cut there and continues next step."""
    out: list[int] = []
    done = 0
    for s in its:
        if s.context_tokens == 0:
            out.append(0)
            done = 0
            continue
        p = done if s.context_requests == 1 else 0
        out.append(p)
        cut = (
            budget_tokens is not None
            and s.context_requests == 1
            and s.context_tokens + s.generation_requests >= budget_tokens
        )
        done = p + s.context_tokens if cut else 0
    return out


def vllm_token_budget(config: EngineConfig, base: CostModel) -> int:
    """The step token budget the simulated vLLM scheduler uses for ``config``."""
    from tierctl.sim.vllm_policy import VllmScheduler

    return VllmScheduler(config, base).token_budget


def iteration_residuals(
    model: CostModel,
    its: list[IterationSample],
    budget_tokens: int | None = None,
    requests: list[MeasuredRequest] | None = None,
) -> dict[str, float]:
    """Mean absolute relative error of the fitted step times, prefill and decode steps apart
    (each step's shape as :func:`fit_iterations` saw it)."""
    ep, ed = [], []
    bare = dataclasses.replace(model, detokenize_per_token_s=0.0)  # the log's time excludes it
    for s, sh in zip(its, iteration_shapes(its, budget_tokens, requests), strict=True):
        if s.elapsed_s <= 0:
            continue
        if sh.chunks:
            t = bare.prefill_s(sh.chunks) + bare.decode_marginal_s(
                sh.decoders, sh.decode_context_tokens
            )
            ep.append(abs(t / s.elapsed_s - 1))
        else:
            ed.append(abs(bare.decode_s(sh.decoders, sh.decode_context_tokens) / s.elapsed_s - 1))
    return {
        "prefill_mean_abs_rel_error": sum(ep) / len(ep) if ep else float("nan"),
        "decode_mean_abs_rel_error": sum(ed) / len(ed) if ed else float("nan"),
    }


def _between_steps(
    its: list[IterationSample], reqs: list[MeasuredRequest], replayed: list[_Replayed]
) -> list[tuple[int, float]]:
    """The time each step took beyond its logged elapsed time, as its decoders saw it.

    With the log replayed against the requests (:func:`replay_iterations`), every token is
    known to come from one step. A request's gap between two tokens from consecutive steps is
    the second step's elapsed time plus what happened between the steps (scheduling, handing
    the outputs on, detokenizing, the SSE write, the client's read). Returns, per step with
    such gaps, (tokens the step emitted, the median of its decoders' gaps minus its elapsed
    time).
    """
    import numpy as np

    emitted = _emitted(len(its), replayed)
    gaps: dict[int, list[float]] = {}
    for m, r in zip(reqs, replayed, strict=True):
        for k, gap in enumerate(m.itl_s[: max(0, len(r.steps) - 1)]):
            a, b = r.steps[k], r.steps[k + 1]
            if b == a + 1:
                gaps.setdefault(b, []).append(gap - its[b].elapsed_s)
    return [(emitted[j], float(np.median(v))) for j, v in sorted(gaps.items())]


def _between_steps_per_request(
    its: list[IterationSample], reqs: list[MeasuredRequest], replayed: list[_Replayed]
) -> list[tuple[float, float]]:
    """The time between steps as each request's whole decode saw it: per request, (tokens
    the steps from its first token to its last emitted, on average; its decode span minus
    those steps' logged elapsed times, per step).

    Only a request's first and last token times enter, so a busy host that hands several
    tokens on in one piece (inter-token gaps of 0, then one long one) does not pull the
    figure down the way single gaps do: on the real engine at load 18 per-gap points put
    the time between steps at 0 where lone requests showed ~2.5 ms a step.
    """
    emitted = _emitted(len(its), replayed)
    out = []
    for m, r in zip(reqs, replayed, strict=True):
        if len(r.steps) < 2 or m.output_tokens < 2:
            continue
        # First token to last: the gaps' sum (exact), else the TPOT's span.
        if m.itl_s:
            span = sum(m.itl_s)
        elif m.tpot_s is not None:
            span = m.tpot_s * (m.output_tokens - 1)
        else:
            continue
        steps = range(r.steps[0] + 1, r.steps[-1] + 1)
        extra = span - sum(its[j].elapsed_s for j in steps)
        out.append((sum(emitted[j] for j in steps) / len(steps), extra / len(steps)))
    return out


def _request_host_time(
    its: list[IterationSample],
    reqs: list[MeasuredRequest],
    replayed: list[_Replayed],
    round_overhead_s: float,
    detokenize_per_token_s: float,
) -> float | None:
    """The API server's time per request before the engine can schedule it, from the log.

    A request's TTFT is its wait for the step that took its first chunk, then every step up to
    the one that sampled its first token (their logged elapsed times, plus the time between
    steps at ``round_overhead_s`` and ``detokenize_per_token_s`` per token emitted). What is
    left is the wait: the host's time for the request, plus any queueing behind a step already
    running or a full batch. A request admitted alone into a step that ran nothing else (no
    decoder, no other prompt: it found the engine idle) had no queue, so its wait is the
    host time; the median over those is taken, as the least of them is one host's luckiest
    request and under-states what a request costs (10 ms where lone requests waited 6-25 ms
    on the real engine). Without any lone request, the least wait of all. None when no
    request has a non-negative wait.
    """
    import statistics

    emitted = _emitted(len(its), replayed)
    waits, lone = [], []
    for m, r in zip(reqs, replayed, strict=True):
        if r.admitted_at < 0 or not r.steps:
            continue
        span = sum(
            its[j].elapsed_s + round_overhead_s + detokenize_per_token_s * emitted[j]
            for j in range(r.admitted_at, r.steps[0] + 1)
        )
        if m.ttft_s - span < 0:
            continue
        waits.append(m.ttft_s - span)
        first = its[r.admitted_at]
        if first.context_requests == 1 and first.generation_requests == 0:
            lone.append(m.ttft_s - span)
    if lone:
        return float(statistics.median(lone))
    return min(waits) if waits else None


def fit_between_steps(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """``round_overhead_s`` and ``detokenize_per_token_s`` from :func:`_between_steps`: a
    robust (Huber) line through the time between steps against the tokens each step emitted,
    both coefficients non-negative."""
    import numpy as np

    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    if len(x) < 3:
        return max(float(np.median(y)), 0.0) if len(y) else 0.0, 0.0
    try:
        from scipy.optimize import least_squares

        fit = least_squares(
            lambda v: v[0] + v[1] * x - y,
            [max(float(np.median(y)), 1e-4), 1e-4],
            bounds=([0.0, 0.0], [np.inf, np.inf]),
            loss="huber",
            f_scale=1e-3,
        )
        return float(fit.x[0]), float(fit.x[1])
    except ImportError:  # pragma: no cover - scipy ships with the bench extra
        slope, icpt = np.polyfit(x, y, 1)
        return max(float(icpt), 0.0), max(float(slope), 0.0)


def fit_overheads(
    model: CostModel,
    reqs: list[MeasuredRequest],
    config: EngineConfig,
    *,
    iterations: list[IterationSample] | None = None,
    budget_tokens: int | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """Fit what the step log leaves out: time between steps, per running sequence and per
    request.

    vLLM's elapsed time covers the model's forward and sampling. Scheduling, output processing
    and streaming each token happen between steps, and the API server parses and admits each
    request before the engine sees it; on a CPU host these are a large part of the time. With
    the logged step coefficients fixed, three terms are fitted through the simulator to the
    same run's request timings (TTFT and TPOT, log scale, soft-L1): a per-round overhead
    (``round_overhead_s``: scheduling), a cost per token streamed out
    (``detokenize_per_token_s``: output processing, detokenization, the SSE write) and a
    per-request host cost (``request_overhead_s``: parsing and admission in the API server,
    before the scheduler sees the request).

    Given the same run's ``iterations``, the first two are measured instead: each step's time
    beyond its logged elapsed time is read off its decoders' inter-token gaps
    (:func:`_between_steps`) and a robust line through them gives both
    (:func:`fit_between_steps`), and the per-request cost is the wait of the request that
    queued least (:func:`_request_host_time`). Nothing is then fitted through the simulator: a
    fit through queueing lets these terms soak up every small step-time error of a busy run
    (a 40 ms per-request cost where the real one is 5 ms).
    """
    import numpy as np

    if len(reqs) < 4:
        raise InputError(
            "not enough completed requests to fit the step overheads",
            rule="at least 4 completed requests are needed",
            value=len(reqs),
            fix="fit on a longer run",
        )
    workload = workload_of(reqs)
    ttft = np.array([m.ttft_s for m in reqs])
    tpot = np.array([m.tpot_s if m.tpot_s is not None else np.nan for m in reqs])
    explained = _explained(iterations, reqs, budget_tokens) if iterations else None
    if (
        iterations
        and explained
        and (direct := _between_steps_per_request(iterations, reqs, explained[1]))
    ):
        o, e = fit_between_steps(direct)
        host = _request_host_time(iterations, reqs, explained[1], o, e)
        fitted = dataclasses.replace(
            model,
            round_overhead_s=o,
            detokenize_per_token_s=e,
            request_overhead_s=host if host is not None else model.request_overhead_s,
        )
        res = timing_residuals(fitted, config, workload, ttft, tpot, model)
        res["between_steps"] = (
            "measured: each request's decode span beyond its steps' logged times, and the "
            "least-queued request's wait"
        )
        res["between_step_points"] = len(direct)
        res["round_overhead_s"] = fitted.round_overhead_s
        res["detokenize_per_token_s"] = fitted.detokenize_per_token_s
        res["request_overhead_s"] = fitted.request_overhead_s
        return fitted, res

    # Start: the gap a lone decoding request shows beyond its logged step time, and a few ms
    # per request.
    lone = [m.tpot_s for m in reqs if m.tpot_s is not None]
    gap0 = max(float(np.median(lone)) - model.decode_s(1, 0), 1e-4) if lone else 1e-3
    scale = np.array([gap0, max(gap0 / 4, 1e-5), 5e-3])

    def model_at(v: Any) -> CostModel:
        o, e, r = scale * np.exp(np.clip(v, -30, 30))
        return dataclasses.replace(
            model,
            round_overhead_s=float(o),
            detokenize_per_token_s=float(e),
            request_overhead_s=float(r),
        )

    def residuals(v: Any) -> Any:
        return log_residuals(model_at(v), config, workload, ttft, tpot)

    x = np.zeros(3)
    try:
        from scipy.optimize import least_squares

        x = least_squares(residuals, x, diff_step=0.05, max_nfev=300, loss="soft_l1", f_scale=0.1).x
    except ImportError:  # pragma: no cover - scipy ships with the bench extra
        pass
    x = coordinate_search(residuals, x)
    fitted = model_at(x)
    res = timing_residuals(fitted, config, workload, ttft, tpot, model)
    res["round_overhead_s"] = fitted.round_overhead_s
    res["detokenize_per_token_s"] = fitted.detokenize_per_token_s
    res["request_overhead_s"] = fitted.request_overhead_s
    return fitted, res


def fit_spec_step_cost(
    its: list[IterationSample],
    model: CostModel,
    draft_steps: int,
    context_per_request: float = 0.0,
) -> tuple[CostModel, dict[str, Any]]:
    """The speculative round's draft and verify cost (``spec_draft_step_s``,
    ``spec_verify_per_token_s``) from the iteration log of a run with speculative decoding on
    (a calibration run: the fit trace on an engine with the arm's ``--speculative-config``).

    A decode-only step of ``B`` requests costs the fitted decode step plus
    ``draft_steps * spec_draft_step_s + spec_verify_per_token_s * draft_steps * B``
    (:meth:`CostModel.spec_round_s`): the log's decode steps at several batch sizes separate
    the two (the intercept and the slope on ``B``), fitted on the log of the step times
    (robust, both >= 0) with ``model``'s decode coefficients fixed. The log does not give the
    decoders' contexts; ``context_per_request`` tokens each stand for them (the fit trace's
    mean prompt plus half its output). Mixed steps are left out (their chunks' cost is the
    target's, the draft's share of them is not told apart).

    Raises:
        InputError: fewer than 3 decode steps, or all at one batch size.
    """
    import numpy as np

    dec = [s for s in its if s.context_requests == 0 and s.generation_requests > 0]
    sizes = {s.generation_requests for s in dec}
    if len(dec) < 3 or len(sizes) < 2 or draft_steps < 1:
        raise InputError(
            "not enough speculative decode steps to fit the draft and verify cost",
            rule="at least 3 decode-only steps at 2 or more batch sizes are needed",
            value={"decode_steps": len(dec), "batch_sizes": sorted(sizes)},
            fix="play a fit trace with decode batches of several sizes on the speculative engine",
        )
    b = np.array([float(s.generation_requests) for s in dec])
    y = np.array([s.elapsed_s for s in dec])
    base = np.array([model.decode_s(int(n), int(n * context_per_request)) for n in b])
    x = np.column_stack([np.full_like(b, float(draft_steps)), draft_steps * b])
    extra = np.maximum(y - base, 0.0)
    start = np.array(
        [
            max(float(np.median(extra[b == b.min()])) / draft_steps, 1e-6),
            max(float(np.median(extra)) / (draft_steps * float(np.median(b))), 1e-7),
        ]
    )
    coefs = start
    try:
        from scipy.optimize import least_squares

        def fun(v: Any) -> Any:
            return np.log(base + x @ (v * start)) - np.log(np.maximum(y, 1e-9))

        fit = least_squares(
            fun, np.ones(2), bounds=(0.0, np.inf), loss="soft_l1", f_scale=0.25, max_nfev=200
        )
        if fit.success:
            coefs = fit.x * start
    except ImportError:  # pragma: no cover - scipy ships with the bench extra
        pass
    draft, verify = float(coefs[0]), float(coefs[1])
    fitted = dataclasses.replace(model, spec_draft_step_s=draft, spec_verify_per_token_s=verify)
    pred = base + x @ coefs
    logs = np.log(y / pred)
    prov = {
        "method": "vLLM iteration log of a speculative run: decode-only steps' time beyond the "
        "fitted decode step, on (draft steps, draft steps x batch), log least squares",
        "decode_steps": len(dec),
        "batch_sizes": sorted(int(v) for v in sizes),
        "context_per_request": context_per_request,
        "spec_draft_step_s": draft,
        "spec_verify_per_token_s": verify,
        "median_log_residual": float(np.median(logs)),
    }
    return fitted, prov
