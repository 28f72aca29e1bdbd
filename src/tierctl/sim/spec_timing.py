"""A speculative round's whole time, fitted from what a client measured on a calibration run.

The iteration log times an engine's forward passes only. Under speculative decoding a round
also proposes the drafts (vLLM's ngram proposer runs on the host after sampling), runs the
rejection sampler and hands several tokens a request on to the API server: time between
forwards that a decode-only F0 run never shows and no engine counter times. On vLLM CPU
(the tiny Llama, ngram with 3 draft tokens, 3.78 tokens a round) the model with the
iteration-log draft and verify cost alone predicted TPOT 0.22x where the engine gave 0.69x
(docs/sim.md, session 8): each real round took about 2.6 plain decode rounds.

:func:`fit_spec_round_time` closes that from the calibration run itself, the fit trace
played on an engine with the arm's speculative config, never a measured workload: it
replays the run's requests (their send times and sizes) through the arm's model without
jitter and solves, by bisection, for the extra time per speculative round that makes the
simulated median TPOT equal the measured one; the extra is charged as draft-step time
(``spec_draft_step_s`` grows by ``extra / draft_steps``), so every place the model already
charges a round's drafts charges it. The median TPOT rises monotonically with that time, so
the root is unique where it exists; a measured TPOT the model already meets or beats leaves
the model as it was (the extra is never negative).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from tierctl.errors import InputError
from tierctl.latency import percentile
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel

#: Requests shorter than this many output tokens carry too few rounds for a TPOT.
MIN_OUTPUT_TOKENS = 8

#: Bisection steps (the extra is found to within 2**-24 of its bracket).
STEPS = 24


def _median_tpot(config: EngineConfig, model: CostModel, reqs: Sequence[MeasuredRequest]) -> float:
    from tierctl.sim.simulate import simulate
    from tierctl.sim.workload import SimRequest, Workload

    wl = Workload.of(
        "calibration",
        [
            SimRequest(f"c{i}", r.sent_s, r.input_tokens, r.output_tokens)
            for i, r in enumerate(reqs)
        ],
    )
    res = simulate(config, wl, model, check_work=False)
    tp = [
        x.tpot_s
        for x, r in zip(res.requests, wl.requests, strict=True)
        if x.tpot_s is not None and r.output_tokens >= MIN_OUTPUT_TOKENS
    ]
    return _p50(tp)


def _p50(values: Sequence[float]) -> float:
    """The median (0 for no values)."""
    got = percentile(list(values), 50) if values else None
    return 0.0 if got is None else float(got)


def fit_spec_round_time(
    model: CostModel,
    config: EngineConfig,
    measured: Sequence[MeasuredRequest],
    reference: tuple[EngineConfig, Sequence[MeasuredRequest]] | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """``model`` with the extra time a speculative round takes on the calibration run
    ``measured`` (played on an engine with ``config``), and the fit's provenance.

    ``reference``: the same trace measured on an engine without speculation (the fit run, and
    its argv). Then the target is the *ratio*: the simulated speculative TPOT is made the
    simulated reference TPOT times the measured ratio, so a bias the base model has on this
    host's absolute TPOT (which the reference shares) is not folded into the speculative term.

    Raises:
        InputError: ``config`` has no speculative decoding, ``model`` no acceptance, or the
            run has fewer than 3 requests of ``MIN_OUTPUT_TOKENS`` tokens or more.
    """
    spec = config.speculative
    usable = [r for r in measured if r.output_tokens >= MIN_OUTPUT_TOKENS and r.tpot_s is not None]
    if spec is None or not (model.spec_accept_rate > 0 or any(model.spec_accept_by_position)):
        raise InputError(
            "the speculative round time needs an arm with speculative decoding and a model "
            "with its acceptance",
            rule="the acceptance is fitted first, from the engine's counters on the same run",
            fix="pass the speculative arm's argv and the cost model with its acceptance",
        )
    if len(usable) < 3:
        raise InputError(
            "too few measured requests to fit the speculative round time",
            rule=f"at least 3 requests of {MIN_OUTPUT_TOKENS} or more output tokens",
            value=len(usable),
            fix="play the fit trace (sim fit-plan) on the speculative engine",
        )
    draft_steps = max(1, spec[0])
    measured_p50 = _p50([r.tpot_s for r in usable if r.tpot_s is not None])
    flat = dataclasses.replace(model, step_jitter=0.0, step_jitter_slow=0.0)
    target = measured_p50
    ref_note: dict[str, Any] = {}
    if reference is not None:
        ref_cfg, ref_reqs = reference
        ref_usable = [
            r.tpot_s for r in ref_reqs if r.output_tokens >= MIN_OUTPUT_TOKENS and r.tpot_s
        ]
        if ref_usable:
            ref_meas = _p50(ref_usable)
            ref_sim = _median_tpot(ref_cfg, flat, ref_reqs)
            target = ref_sim * measured_p50 / ref_meas
            ref_note = {"reference_tpot_measured_p50_s": ref_meas,
                        "reference_tpot_simulated_p50_s": ref_sim}  # fmt: skip

    def with_extra(extra: float) -> CostModel:
        return dataclasses.replace(
            flat, spec_draft_step_s=model.spec_draft_step_s + extra / draft_steps
        )

    before = _median_tpot(config, flat, measured)
    lo, hi = 0.0, 0.0
    if before < target:
        # Bracket: double the extra until the simulated TPOT passes the measured one.
        hi = max(model.decode_s(1, 0), 1e-4)
        while _median_tpot(config, with_extra(hi), measured) < target and hi < 10.0:
            lo, hi = hi, 2 * hi
        for _ in range(STEPS):
            mid = (lo + hi) / 2
            if _median_tpot(config, with_extra(mid), measured) < target:
                lo = mid
            else:
                hi = mid
    extra = (lo + hi) / 2
    fitted = dataclasses.replace(
        model, spec_draft_step_s=model.spec_draft_step_s + extra / draft_steps
    )
    prov = {
        "method": "the calibration run's requests replayed without jitter; the extra time per "
        "speculative round (charged as draft-step time) that makes the simulated median TPOT "
        "the measured one, by bisection",
        "requests": len(usable),
        "tpot_measured_p50_s": measured_p50,
        "tpot_target_p50_s": target,
        **ref_note,
        "tpot_simulated_p50_s_before": before,
        "tpot_simulated_p50_s_after": _median_tpot(
            config, dataclasses.replace(fitted, step_jitter=0.0, step_jitter_slow=0.0), measured
        ),
        "extra_per_round_s": extra,
        "spec_draft_step_s": fitted.spec_draft_step_s,
    }
    return fitted, prov


__all__ = ["MIN_OUTPUT_TOKENS", "fit_spec_round_time"]
