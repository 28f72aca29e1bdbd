"""Fitting a cost model to a real engine: from its step log, or from request timings alone.

* **Step log** (``--from steps``): one line per engine step with its sizes and duration; the
  step coefficients are fitted by non-negative least squares (:func:`tierctl.sim.cost.fit`).
* **vLLM iteration log** (``--from vllm-log``): vLLM 0.32's
  ``--enable-logging-iteration-details`` logs every step's context (prefill) tokens, generation
  requests and the model's elapsed time; the step coefficients are fitted to those, and, given
  the request timings of the same run, the time between steps that the log does not cover
  (scheduling, output processing, streaming) is fitted through the simulator as two terms: per
  round and per running sequence (:func:`fit_iterations`).
* **Request timings** (``--from bench``): a ``tierctl bench run`` or ``bench ab`` results file
  holds, per request, when it was sent, its prompt and output lengths, TTFT and every
  inter-token gap. No step sizes are known, so the coefficients are fitted *through the
  simulator*: the measured requests are replayed (same send times and lengths) on the
  measured engine's flags, and the coefficients are moved until the simulated TTFT and TPOT of
  every request match the measured ones in the least-squares sense on a log scale (so a
  10 ms and a 10 s figure weigh alike). A direct regression on the same data gives the
  starting point. The residuals left are written into the file's provenance.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.results import looks_like_results, read_results
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel, DecodeSample, fit
from tierctl.sim.workload import SimRequest, Workload

# The six step coefficients the timings can inform; memory sizes and defaults stay the base's.
STEP_FIELDS = (
    "prefill_base_s",
    "prefill_per_token_s",
    "prefill_attn_pair_s",
    "decode_base_s",
    "decode_per_seq_s",
    "decode_per_ctx_token_s",
)


@dataclasses.dataclass(frozen=True)
class MeasuredRequest:
    """One completed request of a bench run, as the fit uses it (times from run start)."""

    sent_s: float
    input_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float | None
    itl_s: tuple[float, ...]


def fit_source(
    path: str | Path,
    kind: str,
    base: CostModel,
    config: EngineConfig,
    *,
    timings: str | Path | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """Fit ``base``'s step coefficients to a step log or a bench results file.

    Args:
        path: the file.
        kind: ``steps``, ``bench`` or ``auto`` (a JSON object with ``"kind": "run"|"ab"`` is
            a bench results file; anything else is read as a step log).
        base: the cost model whose memory sizes and overhead are kept; the starting point.
        config: the measured engine's flags (its scheduler is the one replayed).
        timings: with a vLLM iteration log, the bench results file of the same run: the time
            between steps is then fitted to its request timings (:func:`fit_overheads`).

    Returns:
        The fitted model and its provenance (what, how, residuals).
    """
    p = Path(path)
    if kind == "auto":
        kind = (
            "bench"
            if looks_like_results(p)
            else "sglang-log"
            if _looks_like_sglang_log(p)
            else "vllm-log"
            if _looks_like_vllm_log(p)
            else "steps"
        )
    if kind == "vllm-log":
        its = read_vllm_iterations(p)
        budget = vllm_token_budget(config, base)
        reqs = read_bench_requests(timings) if timings is not None else None
        model = fit_iterations(
            its, base, name=f"fitted:{p.name}", budget_tokens=budget, requests=reqs
        )
        residuals: dict[str, Any] = iteration_residuals(model, its, budget, reqs)
        samples: dict[str, int] = {"iterations": len(its)}
        between = "kept from the base (pass the same run's timings to fit it)"
        shapes = "chunk positions rebuilt from the token budget, decode contexts unknown"
        fitted_on = [str(p)]
        if reqs is not None:
            _, bad = replay_iterations(its, reqs, budget)
            residuals["replay_mismatched_steps"] = bad
            if bad * 20 <= len(its):
                shapes = (
                    "every step's chunks and decode contexts rebuilt by replaying the log "
                    "against the timings' requests"
                )
            model, timing_res = fit_overheads(
                model, reqs, config, iterations=its, budget_tokens=budget
            )
            residuals = {**residuals, **timing_res}
            samples["requests"] = len(reqs)
            fitted_on.append(str(timings))
            between = str(
                timing_res.get("between_steps")
                or "fitted through the simulator to the request timings: per round, per token "
                "streamed and per request"
            )
        prov = {
            "fitted_on": fitted_on,
            "method": "vLLM iteration log (--enable-logging-iteration-details): non-negative "
            "least squares of each step's elapsed time on (1, context tokens, attended pairs, "
            f"generation requests, decode context tokens), {shapes}; the time between steps "
            f"{between}",
            "base": base.name,
            "engine": config.engine,
            "engine_argv": list(config.argv),
            "samples": samples,
            "residuals": residuals,
        }
        return model, prov
    if kind == "sglang-log":
        dec = read_sglang_log(p)
        model = fit_decode(dec, base, name=f"fitted:{p.name}")
        prov = {
            "fitted_on": [str(p)],
            "method": "SGLang scheduler log: decode step time = #running-req / gen throughput "
            "per 'Decode batch' line, non-negative least squares on (1, batch, context); "
            "prefill coefficients kept from the base (the log gives no prefill durations)",
            "base": base.name,
            "samples": {"decode_lines": len(dec)},
            "residuals": _step_residuals(model, [], dec),
        }
        return model, prov
    if kind == "steps":
        from tierctl.sim.steplog import read_steps

        pre, dec = read_steps(p)
        model = fit(pre, dec, base=base, name=f"fitted:{p.name}")
        res = _step_residuals(model, pre, dec)
        prov = {
            "fitted_on": [str(p)],
            "method": "non-negative least squares on logged step durations",
            "base": base.name,
            "samples": {"prefill_steps": len(pre), "decode_steps": len(dec)},
            "residuals": res,
        }
        return model, prov
    reqs = read_bench_requests(p)
    model, res = fit_timings(reqs, base, config, name=f"fitted:{p.name}")
    prov = {
        "fitted_on": [str(p)],
        "method": "request timings replayed through the simulator; log-scale least squares "
        "on per-request TTFT and TPOT",
        "base": base.name,
        "engine": config.engine,
        "engine_argv": list(config.argv),
        "samples": {"requests": len(reqs)},
        "residuals": res,
    }
    return model, prov


_DECODE_LINE = re.compile(
    r"Decode batch[.,].*?#running-req: (\d+), #token: (\d+),.*?gen throughput \(token/s\): "
    r"([\d.]+)"
)


def _looks_like_sglang_log(p: Path) -> bool:
    try:
        with p.open("r", encoding="utf-8", errors="replace") as fh:
            return any("Decode batch" in line for _, line in zip(range(5000), fh, strict=False))
    except OSError:
        return False


def read_sglang_log(path: str | Path) -> list[DecodeSample]:
    """Decode steps from SGLang's scheduler log: each ``Decode batch`` line reports the running
    batch, the tokens in use and the generation throughput over the last logging interval, so
    one step took about ``#running-req / throughput`` seconds.

    Raises:
        InputError: the file cannot be read or has no such line.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            f"cannot read the log: {exc.strerror}", location=Location(file=str(p))
        ) from None
    out = []
    for m in _DECODE_LINE.finditer(text):
        running, tokens, rate = int(m.group(1)), int(m.group(2)), float(m.group(3))
        if running > 0 and rate > 0:
            out.append(DecodeSample(running, tokens, running / rate))
    if len(out) < 3:
        raise InputError(
            "fewer than 3 'Decode batch' lines with a throughput in the log",
            location=Location(file=str(p)),
            rule="the engine logs decode stats every --decode-log-interval rounds",
            fix="pass the scheduler's log of a run with decoding traffic",
        )
    return out


_VLLM_ITERATION = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: ([\d.]+) ms(?! \(dummy\))"
)


@dataclasses.dataclass(frozen=True)
class IterationSample:
    """One engine step from vLLM's iteration log: its sizes and the model's elapsed time."""

    context_requests: int
    context_tokens: int
    generation_requests: int
    elapsed_s: float


def _looks_like_vllm_log(p: Path) -> bool:
    try:
        with p.open("r", encoding="utf-8", errors="replace") as fh:
            return any(
                "iteration elapsed time" in line for _, line in zip(range(20000), fh, strict=False)
            )
    except OSError:
        return False


def parse_vllm_iterations(text: str) -> list[IterationSample]:
    """Every non-dummy ``Iteration(N): ...`` line of a vLLM log, in order."""
    return [
        IterationSample(int(m.group(2)), int(m.group(3)), int(m.group(4)), float(m.group(6)) / 1e3)
        for m in _VLLM_ITERATION.finditer(text)
    ]


def read_vllm_iterations(path: str | Path) -> list[IterationSample]:
    """The steps vLLM logged with ``--enable-logging-iteration-details`` (0.32+).

    Raises:
        InputError: the file cannot be read or holds too few iteration lines.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            f"cannot read the log: {exc.strerror}", location=Location(file=str(p))
        ) from None
    its = parse_vllm_iterations(text)
    _enough_iterations(its, str(p))
    return its


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
    import numpy as np

    from tierctl.sim.cost import _nnls_n

    _enough_iterations(its, "iterations")
    shapes = iteration_shapes(its, budget_tokens, requests)
    rows: list[list[float]] = []
    for sh in shapes:
        g, k = float(sh.decoders), float(sh.decode_context_tokens)
        if not sh.chunks:
            rows.append([0.0, 0.0, 0.0, 1.0, g, k])
        else:
            c = sum(n for n, _ in sh.chunks)
            pairs = sum(n * (p + n / 2) for n, p in sh.chunks)
            rows.append([1.0, float(c), pairs, 0.0, g, k])
    x = np.array(rows)
    y = np.array([s.elapsed_s for s in its])
    # Relative least squares (each row over its own time): a 5 ms decode step counts as much
    # as a 150 ms chunk, as the figures compared later are relative errors; plain least
    # squares would fit the chunks and leave short steps (TPOT) off by a quarter.
    w = 1.0 / np.maximum(y, 1e-6)
    if not x[:, 5].any():
        a_p, b, attn, a_d, d = _nnls_n(x[:, :5] * w[:, None], y * w)
        k_ctx = 0.0
    else:
        a_p, b, attn, a_d, d, k_ctx = _nnls_n(x * w[:, None], y * w)
    # What the model leaves unexplained step by step: the robust spread (1.4826 MAD) of the
    # log ratios, which the simulator draws per step (CostModel.step_jitter).
    pred = x @ np.array([a_p, b, attn, a_d, d, k_ctx])
    ok = (pred > 0) & (y > 0)
    logs = np.log(y[ok] / pred[ok])
    jitter = float(1.4826 * np.median(np.abs(logs - np.median(logs)))) if logs.size else 0.0
    return dataclasses.replace(
        base,
        name=name,
        prefill_base_s=a_p,
        prefill_per_token_s=b,
        prefill_attn_pair_s=attn,
        decode_base_s=a_d,
        decode_per_seq_s=d,
        decode_per_ctx_token_s=k_ctx,
        step_jitter=jitter,
    )


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
    window = list(itertools.islice(waiting, _REORDER_WINDOW))
    for combo in permutations(window, min(count, len(window))):
        if len(combo) < count:
            return None
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
    running or a full batch. The request that waited least had no queue, so the smallest wait
    is the host time. None when no request has a non-negative wait.
    """
    emitted = _emitted(len(its), replayed)
    waits = []
    for m, r in zip(reqs, replayed, strict=True):
        if r.admitted_at < 0 or not r.steps:
            continue
        span = sum(
            its[j].elapsed_s + round_overhead_s + detokenize_per_token_s * emitted[j]
            for j in range(r.admitted_at, r.steps[0] + 1)
        )
        if m.ttft_s - span >= 0:
            waits.append(m.ttft_s - span)
    return min(waits) if waits else None


def fit_between_steps(points: list[tuple[int, float]]) -> tuple[float, float]:
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
    if iterations and explained and (direct := _between_steps(iterations, reqs, explained[1])):
        o, e = fit_between_steps(direct)
        host = _request_host_time(iterations, reqs, explained[1], o, e)
        fitted = dataclasses.replace(
            model,
            round_overhead_s=o,
            detokenize_per_token_s=e,
            request_overhead_s=host if host is not None else model.request_overhead_s,
        )
        res = _timing_residuals(fitted, config, workload, ttft, tpot, model)
        res["between_steps"] = (
            "measured: inter-token gaps of consecutive steps, and the least-queued request's wait"
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
        return _log_residuals(model_at(v), config, workload, ttft, tpot)

    x = np.zeros(3)
    try:
        from scipy.optimize import least_squares

        x = least_squares(residuals, x, diff_step=0.05, max_nfev=300, loss="soft_l1", f_scale=0.1).x
    except ImportError:  # pragma: no cover - scipy ships with the bench extra
        pass
    x = _coordinate_search(residuals, x)
    fitted = model_at(x)
    res = _timing_residuals(fitted, config, workload, ttft, tpot, model)
    res["round_overhead_s"] = fitted.round_overhead_s
    res["detokenize_per_token_s"] = fitted.detokenize_per_token_s
    res["request_overhead_s"] = fitted.request_overhead_s
    return fitted, res


def fit_decode(dec: list[DecodeSample], base: CostModel, *, name: str) -> CostModel:
    """Fit the decode coefficients alone (the prefill ones stay the base's)."""
    import numpy as np

    from tierctl.sim.cost import _nnls

    oh = base.round_overhead_s
    x = np.array([[1.0, float(s.batch_size), float(s.context_tokens)] for s in dec])
    y = np.array([s.duration_s - oh for s in dec])
    a, d, k = _nnls(x, y)
    return dataclasses.replace(
        base, name=name, decode_base_s=a, decode_per_seq_s=d, decode_per_ctx_token_s=k
    )


def read_bench_requests(path: str | Path) -> list[MeasuredRequest]:
    """The completed requests of a ``tierctl bench run`` (or every block of ``bench ab``).

    Raises:
        InputError: not a bench results file, or no completed request in it.
    """
    results = read_results(path)
    out = [
        MeasuredRequest(
            sent_s=r.sent_s + 1e6 * n,  # blocks never overlap
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            ttft_s=r.ttft_s,
            tpot_s=r.tpot_s,
            itl_s=r.itl_s,
        )
        for n, run in enumerate(results.runs)
        for r in run.completed_requests(results.source)
    ]
    if not out:
        raise InputError(
            "no completed request with a first token in the bench results",
            location=Location(file=str(path)),
            fix="fit on a run whose requests completed",
        )
    return sorted(out, key=lambda m: m.sent_s)


def workload_of(reqs: list[MeasuredRequest], name: str = "measured") -> Workload:
    """The measured requests as a simulator workload (same send times and lengths)."""
    t0 = reqs[0].sent_s if reqs else 0.0
    return Workload.of(
        name,
        [
            SimRequest(f"m-{i}", m.sent_s - t0, max(1, m.input_tokens), max(1, m.output_tokens))
            for i, m in enumerate(reqs)
        ],
    )


def fit_timings(
    reqs: list[MeasuredRequest], base: CostModel, config: EngineConfig, *, name: str = "fitted"
) -> tuple[CostModel, dict[str, Any]]:
    """Fit the step coefficients so the simulator reproduces measured request timings."""
    import numpy as np

    if len(reqs) < 4:
        raise InputError(
            "not enough completed requests to fit the cost model",
            rule="at least 4 completed requests with varied prompt lengths are needed",
            value=len(reqs),
            fix="fit on a longer run (tens of requests, several prompt lengths)",
        )
    start = initial_guess(reqs, base)
    workload = workload_of(reqs)
    ttft = np.array([m.ttft_s for m in reqs])
    tpot = np.array([m.tpot_s if m.tpot_s is not None else np.nan for m in reqs])
    scale = np.array([max(getattr(start, f), 1e-15) for f in STEP_FIELDS])

    def model_at(x: Any) -> CostModel:
        vals = scale * np.exp(np.clip(x, -30, 30))
        coefs: dict[str, Any] = dict(zip(STEP_FIELDS, map(float, vals), strict=True))
        return dataclasses.replace(start, name=name, **coefs)

    def residuals(x: Any) -> Any:
        return _log_residuals(model_at(x), config, workload, ttft, tpot)

    x0 = np.zeros(len(STEP_FIELDS))
    best_x = x0
    try:
        from scipy.optimize import least_squares

        sol = least_squares(
            residuals, x0, diff_step=0.05, max_nfev=400, loss="soft_l1", f_scale=0.1
        )
        best_x = sol.x
    except ImportError:  # pragma: no cover - scipy ships with the bench extra
        pass
    # The simulator is piecewise in its coefficients (rounds are discrete), so a gradient
    # step can stall on a plateau: a derivative-free pass from there finishes the fit.
    best_x = _coordinate_search(residuals, best_x)
    model = model_at(best_x)
    return model, _timing_residuals(model, config, workload, ttft, tpot, start)


def _log_residuals(
    model: CostModel, config: EngineConfig, workload: Workload, ttft: Any, tpot: Any
) -> Any:
    import numpy as np

    from tierctl.sim.simulate import simulate

    res = simulate(config, workload, model)
    by_rid = {r.rid: r for r in res.requests}
    out = []
    for i, (t, p) in enumerate(zip(ttft, tpot, strict=True)):
        r = by_rid.get(f"m-{i}")
        st = r.ttft_s if r is not None and r.ttft_s else None
        out.append(math.log(st / t) if st and t > 0 else 5.0)
        if not np.isnan(p) and p > 0:
            sp = r.tpot_s if r is not None else None
            out.append(math.log(sp / p) if sp else 5.0)
    return np.array(out)


def _coordinate_search(fun: Any, x0: Any) -> Any:
    import numpy as np

    def loss(v: Any) -> float:
        # The soft-L1 loss least_squares minimised (f_scale 0.1), so this pass only improves it.
        z = (np.asarray(v) / 0.1) ** 2
        return float(np.sum(2 * (np.sqrt(1 + z) - 1)))

    x = np.array(x0, dtype=float)
    best = loss(fun(x))
    step = 1.0
    evals = 0
    while step > 0.06 and evals < 120:
        improved = False
        for j in range(len(x)):
            for d in (step, -step):
                y = x.copy()
                y[j] += d
                v = loss(fun(y))
                evals += 1
                if v < best:
                    x, best, improved = y, v, True
        if not improved:
            step /= 2
    return x


def initial_guess(reqs: list[MeasuredRequest], base: CostModel) -> CostModel:
    """A direct regression on the timings: the start of the simulated fit.

    Decode: each request's TPOT against the number of requests decoding alongside it (the
    overlap of their decode intervals). Prefill: TTFT against prompt length, over the requests
    that found the engine idle.
    """
    import numpy as np

    spans = [
        (m.sent_s + m.ttft_s, m.sent_s + m.ttft_s + (m.tpot_s or 0) * (m.output_tokens - 1))
        for m in reqs
    ]
    rows, ys = [], []
    for i, m in enumerate(reqs):
        if m.tpot_s is None or m.output_tokens < 2:
            continue
        a0, a1 = spans[i]
        length = max(a1 - a0, 1e-9)
        overlap = sum(max(0.0, min(a1, b1) - max(a0, b0)) / length for b0, b1 in spans)
        rows.append([1.0, overlap])
        ys.append(m.tpot_s)
    dec = (base.decode_base_s, base.decode_per_seq_s)
    if len(rows) >= 2:
        coef, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
        dec = (max(float(coef[0]), 1e-6), max(float(coef[1]), 1e-7))
    busy_until = -math.inf
    prow, pys = [], []
    for m in reqs:
        if m.sent_s >= busy_until:
            c = float(m.input_tokens)
            prow.append([1.0, c, c * c / 2])
            pys.append(max(m.ttft_s - dec[0], 1e-6))
        busy_until = max(busy_until, m.sent_s + m.ttft_s + (m.tpot_s or 0) * m.output_tokens)
    pre = (base.prefill_base_s, base.prefill_per_token_s, base.prefill_attn_pair_s)
    if len(prow) >= 3:
        from tierctl.sim.cost import _nnls

        a, b, g = _nnls(np.array(prow), np.array(pys))
        pre = (max(a, 1e-6), max(b, 1e-9), max(g, 1e-15))
    return dataclasses.replace(
        base,
        prefill_base_s=pre[0],
        prefill_per_token_s=pre[1],
        prefill_attn_pair_s=pre[2],
        decode_base_s=dec[0],
        decode_per_seq_s=dec[1],
        decode_per_ctx_token_s=max(base.decode_per_ctx_token_s, 1e-15),
    )


def _timing_residuals(
    model: CostModel,
    config: EngineConfig,
    workload: Workload,
    ttft: Any,
    tpot: Any,
    start: CostModel,
) -> dict[str, Any]:
    import numpy as np

    from tierctl.sim.simulate import simulate

    res = simulate(config, workload, model)
    by_rid = {r.rid: r for r in res.requests}
    e_ttft, e_tpot = [], []
    for i, (t, p) in enumerate(zip(ttft, tpot, strict=True)):
        r = by_rid.get(f"m-{i}")
        if r is None or r.ttft_s is None:
            continue
        e_ttft.append(r.ttft_s / t - 1)
        if not np.isnan(p) and r.tpot_s:
            e_tpot.append(r.tpot_s / p - 1)
    at = np.abs(np.array(e_ttft)) if e_ttft else np.array([np.nan])
    ap = np.abs(np.array(e_tpot)) if e_tpot else np.array([np.nan])
    sim_ttft = [r.ttft_s for r in res.requests if r.ttft_s is not None]
    return {
        "ttft_median_abs_rel_error": float(np.median(at)),
        "ttft_p90_abs_rel_error": float(np.percentile(at, 90)),
        "tpot_median_abs_rel_error": float(np.median(ap)),
        "tpot_p90_abs_rel_error": float(np.percentile(ap, 90)),
        "ttft_p50_measured_s": float(np.median(ttft)),
        "ttft_p50_simulated_s": float(np.median(sim_ttft)) if sim_ttft else float("nan"),
        "start": {f: getattr(start, f) for f in STEP_FIELDS},
    }


def _step_residuals(model: CostModel, pre: list[Any], dec: list[Any]) -> dict[str, float]:
    oh = model.round_overhead_s
    ep = [abs((oh + model.prefill_s(s.chunks)) / s.duration_s - 1) for s in pre if s.duration_s > 0]
    ed = [
        abs((oh + model.decode_s(s.batch_size, s.context_tokens)) / s.duration_s - 1)
        for s in dec
        if s.duration_s > 0
    ]
    return {
        "prefill_mean_abs_rel_error": sum(ep) / len(ep) if ep else float("nan"),
        "decode_mean_abs_rel_error": sum(ed) / len(ed) if ed else float("nan"),
    }
