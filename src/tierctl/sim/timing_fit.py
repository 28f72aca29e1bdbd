"""Fitting a cost model to request timings alone (``tierctl sim fit --from bench``).

A ``tierctl bench run`` or ``bench ab`` results file (:mod:`tierctl.results`) holds, per
request, when it was sent, its prompt and output lengths, TTFT and every inter-token gap. No
step sizes are known, so the coefficients are fitted *through the simulator*: the measured
requests are replayed (same send times and lengths) on the measured engine's flags, and the
coefficients are moved until the simulated TTFT and TPOT of every request match the measured
ones in the least-squares sense on a log scale (so a 10 ms and a 10 s figure weigh alike). A
direct regression on the same data (:func:`initial_guess`) gives the starting point.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.results import MeasuredRequest, read_results
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.lstsq import coordinate_search
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


def read_bench_requests(path: str | Path) -> list[MeasuredRequest]:
    """The completed requests of a ``tierctl bench run`` (or every block of ``bench ab``).

    Raises:
        InputError: not a bench results file, or no completed request in it.
    """
    results = read_results(path)
    out = [
        dataclasses.replace(r, sent_s=r.sent_s + 1e6 * n)  # blocks never overlap
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


def bench_requests_left_out(path: str | Path) -> tuple[int, int]:
    """(left out, all): the requests of a bench results file that :func:`read_bench_requests`
    leaves out (not completed, or no first token: a stream read in one piece, an error) and
    how many it holds. The engine served them all, so a log replay against the kept ones
    loses count."""
    results = read_results(path)
    total = sum(len(run.requests) for run in results.runs)
    kept = sum(len(run.completed_requests(results.source)) for run in results.runs)
    return total - kept, total


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
        return log_residuals(model_at(x), config, workload, ttft, tpot)

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
    best_x = coordinate_search(residuals, best_x)
    model = model_at(best_x)
    return model, timing_residuals(model, config, workload, ttft, tpot, start)


def log_residuals(
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
        from tierctl.sim.lstsq import nnls

        a, b, g = nnls(np.array(prow), np.array(pys))
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


def timing_residuals(
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
