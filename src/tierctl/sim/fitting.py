"""Fitting a cost model to a real engine: one class per source it can be fitted from.

* **Step log** (``--from steps``, :class:`StepLogFit`): one line per engine step with its sizes
  and duration; the step coefficients are fitted by non-negative least squares
  (:func:`tierctl.sim.cost.fit`).
* **SGLang scheduler log** (``--from sglang-log``, :class:`SglangLogFit`): each ``Decode batch``
  line gives a decode step's batch, context and time (the grammar is the SGLang profile's).
* **vLLM iteration log** (``--from vllm-log``, :class:`VllmLogFit`): every step's sizes and
  elapsed time, and with the same run's request timings the time between steps too
  (:mod:`tierctl.sim.iteration_fit`).
* **Request timings** (``--from bench``, :class:`BenchTimingsFit`): a bench results file,
  fitted through the simulator (:mod:`tierctl.sim.timing_fit`).

:func:`fit_source` picks the source (``auto``: the first whose :meth:`FitSource.recognises`
the file) and returns the fitted model with its provenance (what, how, residuals). Every file
is read through :mod:`tierctl.readers`, bounded: a FIFO or ``/dev/zero`` is refused, not read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from tierctl.engines import SGLANG, VLLM
from tierctl.errors import InputError, Location
from tierctl.readers import read_bytes
from tierctl.results import looks_like_results
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel, DecodeSample, fit
from tierctl.sim.domain import StepDomain, domain_of
from tierctl.sim.iteration_fit import (
    STEP_COEFFICIENTS,
    bootstrap_runs,
    fit_iteration_runs,
    fit_overheads,
    iteration_domain,
    iteration_residuals,
    read_log,
    read_vllm_iterations,
    replay_iterations,
    vllm_token_budget,
)
from tierctl.sim.steplog import read_steps
from tierctl.sim.timing_fit import fit_timings, read_bench_requests

#: How much of a log is read to recognise it (a few thousand lines).
_SNIFF_BYTES = 4 * 1024 * 1024


def _head_lines(path: Path, lines: int) -> list[str]:
    """The first ``lines`` lines of ``path`` (bounded, never blocking); [] if unreadable."""
    try:
        head = read_bytes(path, what="engine log", head=_SNIFF_BYTES)
    except InputError:
        return []
    return head.decode("utf-8", errors="replace").splitlines()[:lines]


class FitSource:
    """One kind of file a cost model can be fitted to."""

    #: The ``--from`` name.
    kind: ClassVar[str]

    def recognises(self, path: Path) -> bool:
        """Whether ``path`` looks like this source (``--from auto``)."""
        return False

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """The fitted model and its provenance."""
        raise NotImplementedError


class BenchTimingsFit(FitSource):
    """A ``tierctl bench run``/``bench ab`` results file: request timings only."""

    kind = "bench"

    def recognises(self, path: Path) -> bool:
        """A JSON object of a bench results kind."""
        return looks_like_results(path)

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """Replay the requests through the simulator, fitted on a log scale."""
        reqs = read_bench_requests(path)
        model, res = fit_timings(reqs, base, config, name=f"fitted:{path.name}")
        prov = {
            "fitted_on": [str(path)],
            "method": "request timings replayed through the simulator; log-scale least squares "
            "on per-request TTFT and TPOT",
            # The shapes the replay ran (no bootstrap: each refit is a whole optimisation).
            "domain": _replayed_domain(reqs, model, config),
            "base": base.name,
            "engine": config.engine,
            "engine_argv": list(config.argv),
            "samples": {"requests": len(reqs)},
            "residuals": res,
        }
        return model, prov


class SglangLogFit(FitSource):
    """SGLang's scheduler log: decode steps from its ``Decode batch`` lines."""

    kind = "sglang-log"

    def recognises(self, path: Path) -> bool:
        """A decode statistics line within the first 5,000 lines."""
        return any(SGLANG.decode_log_marker in line for line in _head_lines(path, 5000))

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """The decode coefficients; the prefill ones stay the base's."""
        dec = read_sglang_log(path)
        model = fit_decode(dec, base, name=f"fitted:{path.name}")
        prov = {
            "fitted_on": [str(path)],
            "method": "SGLang scheduler log: decode step time = #running-req / gen throughput "
            "per 'Decode batch' line, non-negative least squares on (1, batch, context); "
            "prefill coefficients kept from the base (the log gives no prefill durations)",
            "base": base.name,
            "samples": {"decode_lines": len(dec)},
            "residuals": _step_residuals(model, [], dec),
        }
        return model, prov


class VllmLogFit(FitSource):
    """vLLM's iteration log, and optionally the same run's request timings."""

    kind = "vllm-log"

    def recognises(self, path: Path) -> bool:
        """An iteration detail line within the first 20,000 lines."""
        return any(VLLM.iteration_log_marker in line for line in _head_lines(path, 20000))

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """The step coefficients from the log; the time between steps from the timings."""
        return self.fit_log(path, base, config, timings)

    def fit_log(
        self,
        path: Path,
        base: CostModel,
        config: EngineConfig,
        timings: Path | None,
        allow_mismatch: bool = False,
    ) -> tuple[CostModel, dict[str, Any]]:
        """:meth:`fit`; ``allow_mismatch`` fits a log whose replay mismatches (warned)."""
        from tierctl.sim.timing_fit import bench_requests_left_out

        reqs = read_bench_requests(timings) if timings is not None else None
        left_out = bench_requests_left_out(timings) if timings is not None else (0, 0)
        fitted_on = [str(path)] + ([str(timings)] if timings is not None else [])
        return fit_vllm_log(
            read_vllm_iterations(path), base, config, reqs, name=f"fitted:{path.name}",
            fitted_on=fitted_on, left_out=left_out, allow_mismatch=allow_mismatch,
            where=str(timings) if timings is not None else str(path),
        )  # fmt: skip


def fit_vllm_log(
    its: list[Any],
    base: CostModel,
    config: EngineConfig,
    reqs: list[Any] | None,
    *,
    name: str,
    fitted_on: list[str],
    more_runs: Sequence[tuple[list[Any], list[Any] | None, EngineConfig]] = (),
    left_out: tuple[int, int] = (0, 0),
    allow_mismatch: bool = False,
    where: str = "timings",
) -> tuple[CostModel, dict[str, Any]]:
    """``sim fit --from vllm-log [--timings]`` on parsed iterations and measured requests:
    the model and its provenance (residuals, bootstrap refits, domain), as the CLI writes
    them (``benchmarks/sim_whatif.py`` fits in process with it).

    ``more_runs`` (iterations, requests, engine config) join the step coefficients' fit, its
    bootstrap and its domain, each replayed at its own engine's budget: a fit run at the
    larger arm's budget cannot cut a prompt into the smaller arm's deep chunks (the prompt
    would have to be longer than the model's context), so that arm's ladder is a second run.
    The time between steps is measured on the first run alone.

    ``left_out`` (left out, all): the timings' requests without a first token, which the
    replay cannot place. A replay that mismatches more than one step in twenty is refused
    (:func:`check_replay`): its decode contexts are unknown, and the fit then put the decode
    context cost at 0 silently; ``allow_mismatch`` fits it anyway, with a warning in the
    provenance (``warnings``).

    Raises:
        InputError: the replay mismatched too many steps and ``allow_mismatch`` is False.
    """
    budget = vllm_token_budget(config, base)
    runs = [(its, budget, reqs)] + [
        (m_its, vllm_token_budget(m_cfg, base), m_reqs) for m_its, m_reqs, m_cfg in more_runs
    ]
    model = fit_iteration_runs(runs, base, name=name)
    residuals: dict[str, Any] = iteration_residuals(model, its, budget, reqs)
    samples: dict[str, int] = {"iterations": len(its)}
    between = "kept from the base (pass the same run's timings to fit it)"
    shapes = "chunk positions rebuilt from the token budget, decode contexts unknown"
    warnings: list[str] = []
    if reqs is not None:
        _, bad = replay_iterations(its, reqs, budget)
        residuals["replay_mismatched_steps"] = bad
        residuals["timings_left_out"] = left_out[0]
        note = check_replay(bad, len(its), left_out, allow=allow_mismatch, where=where)
        warnings += [note] if note else []
        if bad * 20 <= len(its):
            shapes = (
                "every step's chunks and decode contexts rebuilt by replaying the log "
                "against the timings' requests"
            )
        model, timing_res = fit_overheads(model, reqs, config, iterations=its, budget_tokens=budget)
        residuals = {**residuals, **timing_res}
        samples["requests"] = len(reqs)
        between = str(
            timing_res.get("between_steps")
            or "fitted through the simulator to the request timings: per round, per token "
            "streamed and per request"
        )
    refits = bootstrap_runs(runs)
    domain = StepDomain()
    for r_its, r_budget, r_reqs in runs:
        domain = domain.union(iteration_domain(r_its, r_budget, r_reqs))
    if more_runs:
        samples["more_runs_iterations"] = sum(len(m[0]) for m in more_runs)
    prov = {
        "fitted_on": fitted_on,
        "domain": domain.to_json(),
        "uncertainty": {
            "method": "moving-block bootstrap over the logged steps (blocks of ~sqrt(n) "
            "consecutive steps), the six step coefficients refitted on each",
            "samples": refits,
        },
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
    if warnings:
        prov["warnings"] = warnings
    return model, prov


#: The share of a log's steps its replay may mismatch before the fit is refused (other
#: traffic now and then; past it the decode contexts are unknown).
REPLAY_MISMATCH_LIMIT = 1 / 20


def check_replay(
    bad: int, steps: int, left_out: tuple[int, int], *, allow: bool, where: str
) -> str | None:
    """Refuse (or, with ``allow``, return the warning for) a log replay that mismatched more
    than :data:`REPLAY_MISMATCH_LIMIT` of its steps, with the counts and the likely cause:
    requests of the timings left out for having no first token (a fit whose replay
    mismatched 419 of 2,276 steps, 2 streams without TTFT dropped, put the decode context cost
    at 0 and was accepted silently). None when the replay holds.

    Raises:
        InputError: past the limit and not ``allow``.
    """
    if bad <= steps * REPLAY_MISMATCH_LIMIT:
        return None
    dropped, total = left_out
    why = (
        f"{dropped} of the timings' {total} requests have no first token or did not complete "
        "and were left out, but the engine served them, so the replay loses count from the "
        "first of them on"
        if dropped
        else "the log holds traffic the timings do not (another client, a warm-up), or the "
        "timings are of another run"
    )
    message = (
        f"the iteration log's replay against the timings mismatched {bad:,} of {steps:,} "
        f"steps ({bad / max(1, steps):.0%}, more than 1 in 20): {why}; those steps' chunk "
        "positions and decode contexts are unknown, so the decode context cost cannot be fitted"
    )
    if allow:
        return message
    raise InputError(
        message,
        location=Location(file=where),
        rule="a vLLM log fit with `timings` replays at least 19 of every 20 logged steps",
        value=f"{bad} of {steps} steps mismatched; {dropped} of {total} requests left out",
        fix="fit on a run whose every request completed with a first token (rerun the fit "
        "trace with `tierctl bench run` in real time), or pass `allow_mismatch` to fit it "
        "anyway (warned; decode context cost unreliable)",
        params=("timings", "allow_mismatch"),
    )


class StepLogFit(FitSource):
    """tierctl's own step log: every step's sizes and duration (JSON lines)."""

    kind = "steps"

    def recognises(self, path: Path) -> bool:
        """Anything the other sources do not recognise is read as a step log."""
        return True

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """Non-negative least squares on the logged step durations."""
        pre, dec = read_steps(path)
        model = fit(pre, dec, base=base, name=f"fitted:{path.name}")
        prov = {
            "fitted_on": [str(path)],
            "domain": domain_of(
                [(s.chunks, 0, 0) for s in pre]
                + [((), d.batch_size, d.context_tokens) for d in dec]
            ).to_json(),
            "uncertainty": {
                "method": "moving-block bootstrap over the logged prefill and decode steps",
                "samples": _bootstrap_steps(pre, dec, base),
            },
            "method": "non-negative least squares on logged step durations",
            "base": base.name,
            "samples": {"prefill_steps": len(pre), "decode_steps": len(dec)},
            "residuals": _step_residuals(model, pre, dec),
        }
        return model, prov


def _replayed_domain(reqs: list[Any], model: CostModel, config: EngineConfig) -> dict[str, int]:
    from tierctl.sim.simulate import simulate
    from tierctl.sim.timing_fit import workload_of

    return simulate(config, workload_of(reqs), model).domain


def _bootstrap_steps(
    pre: list[Any], dec: list[Any], base: CostModel, samples: int = 40
) -> list[dict[str, float]]:
    """The step-log fit refitted on block-bootstrap resamples of its prefill and decode steps."""
    from tierctl.sim.uncertainty import block_bootstrap

    out = []
    for ip, idd in zip(
        block_bootstrap(len(pre), samples, 1), block_bootstrap(len(dec), samples, 2), strict=True
    ):
        refit = fit([pre[i] for i in ip], [dec[i] for i in idd], base=base)
        out.append({k: getattr(refit, k) for k in STEP_COEFFICIENTS})
    return out


#: The sources in the order ``auto`` tries them (the step log last: it takes anything).
class SpecMetricsFit(FitSource):
    """An engine's ``/metrics`` dump: speculative decoding's acceptance only
    (:mod:`tierctl.sim.accept_fit`); every other coefficient stays the base's."""

    kind = "spec-metrics"

    def recognises(self, path: Path) -> bool:
        """A speculative decoding family of either engine's profile in the first lines."""
        names = [
            prof.prefix + prof.metrics.extra[key]
            for prof, key in (
                (VLLM, "spec_drafts"),
                (SGLANG, "spec_accept_length"),
            )
        ]
        return any(n in line for line in _head_lines(path, 20_000) for n in names)

    def fit(
        self, path: Path, base: CostModel, config: EngineConfig, timings: Path | None
    ) -> tuple[CostModel, dict[str, Any]]:
        """The acceptance; ``timings`` is not used."""
        from tierctl.sim.accept_fit import acceptance_from

        model, entry = acceptance_from(str(path), base, config)
        model = dataclasses.replace(model, name=f"fitted:{path.name}")
        prov = {
            "fitted_on": [str(path)],
            "method": "speculative decoding acceptance from the engine's counters; the step "
            "coefficients kept from the base",
            "base": base.name,
            "engine": config.engine,
            "engine_argv": list(config.argv),
            "acceptance": entry,
        }
        return model, prov


FIT_SOURCES: tuple[FitSource, ...] = (
    BenchTimingsFit(),
    SglangLogFit(),
    VllmLogFit(),
    SpecMetricsFit(),
    StepLogFit(),
)


def fit_source(
    path: str | Path,
    kind: str,
    base: CostModel,
    config: EngineConfig,
    *,
    timings: str | Path | None = None,
    allow_mismatch: bool = False,
) -> tuple[CostModel, dict[str, Any]]:
    """Fit ``base``'s step coefficients to a step log, an engine's log or a bench results file.

    Args:
        path: the file.
        kind: a source's ``kind`` (``steps``, ``sglang-log``, ``vllm-log``, ``bench``) or
            ``auto`` (a JSON object with ``"kind": "run"|"ab"`` is a bench results file, a log
            with the engine's step lines is that engine's log; anything else is read as a step
            log).
        base: the cost model whose memory sizes and overhead are kept; the starting point.
        config: the measured engine's flags (its scheduler is the one replayed).
        timings: with a vLLM iteration log, the bench results file of the same run: the time
            between steps is then fitted to its request timings (:func:`fit_overheads`).
        allow_mismatch: with a vLLM log and timings, fit even when the log's replay
            mismatches more than one step in twenty (warned in ``provenance.warnings``).

    Returns:
        The fitted model and its provenance (what, how, residuals).
    """
    p = Path(path)
    if kind == "auto":
        source = next(s for s in FIT_SOURCES if s.recognises(p))
    else:
        # Any other kind is read as request timings (the CLI offers only the sources' kinds).
        source = next((s for s in FIT_SOURCES if s.kind == kind), FIT_SOURCES[0])
    timed = None if timings is None else Path(timings)
    if isinstance(source, VllmLogFit):
        return source.fit_log(p, base, config, timed, allow_mismatch)
    return source.fit(p, base, config, timed)


def read_sglang_log(path: str | Path) -> list[DecodeSample]:
    """Decode steps from SGLang's scheduler log: each ``Decode batch`` line reports the running
    batch, the tokens in use and the generation throughput over the last logging interval, so
    one step took about ``#running-req / throughput`` seconds.

    Raises:
        InputError: the file cannot be read or has no such line.
    """
    p = Path(path)
    out = []
    for running, tokens, rate in SGLANG.decode_log_stats(read_log(p)):
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


def fit_decode(dec: list[DecodeSample], base: CostModel, *, name: str) -> CostModel:
    """Fit the decode coefficients alone (the prefill ones stay the base's)."""
    import numpy as np

    from tierctl.sim.lstsq import nnls

    oh = base.round_overhead_s
    x = np.array([[1.0, float(s.batch_size), float(s.context_tokens)] for s in dec])
    y = np.array([s.duration_s - oh for s in dec])
    a, d, k = nnls(x, y)
    return dataclasses.replace(
        base, name=name, decode_base_s=a, decode_per_seq_s=d, decode_per_ctx_token_s=k
    )


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
