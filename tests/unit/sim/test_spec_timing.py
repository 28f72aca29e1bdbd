"""The speculative round's time fitted from a calibration run's TPOT (tierctl.sim.spec_timing)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tierctl.errors import InputError
from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.costfile import read_cost_model
from tierctl.sim.simulate import simulate
from tierctl.sim.spec_timing import fit_spec_round_time
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

SPEC = ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
        "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1")  # fmt: skip
ARM = EngineConfig.from_argv(["python", "-m", "sglang.launch_server", *SPEC])
PLAIN = EngineConfig.from_argv(["python", "-m", "sglang.launch_server"])
BASE = dataclasses.replace(
    FLAT, name="flat-spec", spec_accept_rate=0.7, spec_draft_step_s=0.0005,
    spec_verify_per_token_s=0.0002,
)  # fmt: skip


def _measured(cfg: EngineConfig, model: object, scale: float = 1.0) -> list[MeasuredRequest]:
    """What a client would measure: the simulated run of a small trace (TPOT times ``scale``:
    a host whose every figure is that much slower than the model says)."""
    reqs = [SimRequest(f"r{i}", 0.5 * i, 200 + 50 * i, 40 + 10 * i) for i in range(6)]
    res = simulate(cfg, Workload.of("cal", reqs), model)
    return [
        MeasuredRequest(
            r.arrival_s,
            q.input_tokens,
            q.output_tokens,
            r.ttft_s or 0.0,
            (r.tpot_s or 0.0) * scale,
            (),
        )
        for r, q in zip(res.requests, reqs, strict=True)
    ]


def test_recovers_the_round_time_the_iteration_log_cannot_see() -> None:
    truth = dataclasses.replace(BASE, spec_draft_step_s=BASE.spec_draft_step_s + 0.004)
    fitted, prov = fit_spec_round_time(BASE, ARM, _measured(ARM, truth))
    # 3 draft steps: the round's extra 12 ms comes back as 4 ms a draft step.
    assert fitted.spec_draft_step_s == pytest.approx(truth.spec_draft_step_s, rel=0.05)
    assert prov["tpot_simulated_p50_s_after"] == pytest.approx(
        prov["tpot_measured_p50_s"], rel=0.02
    )
    assert prov["extra_per_round_s"] > 0


def test_a_model_already_slow_enough_is_left_as_it_was() -> None:
    fitted, prov = fit_spec_round_time(BASE, ARM, _measured(ARM, BASE, scale=0.8))
    assert fitted.spec_draft_step_s == BASE.spec_draft_step_s
    assert prov["extra_per_round_s"] == 0


def test_a_reference_run_keeps_the_host_bias_out_of_the_term() -> None:
    """A host 1.5x slower than the model on every figure: the speculative run alone would
    charge that to the round; against a plain run of the same trace it is the host's."""
    measured = _measured(ARM, BASE, scale=1.5)
    reference = (PLAIN, _measured(PLAIN, BASE, scale=1.5))
    alone, _ = fit_spec_round_time(BASE, ARM, measured)
    assert alone.spec_draft_step_s > BASE.spec_draft_step_s + 0.001
    paired, prov = fit_spec_round_time(BASE, ARM, measured, reference)
    assert paired.spec_draft_step_s == pytest.approx(BASE.spec_draft_step_s, abs=2e-4)
    assert prov["tpot_target_p50_s"] < prov["tpot_measured_p50_s"]


def test_refuses_what_it_cannot_fit() -> None:
    with pytest.raises(InputError, match="speculative decoding"):
        fit_spec_round_time(BASE, PLAIN, _measured(PLAIN, BASE))
    with pytest.raises(InputError, match="too few"):
        fit_spec_round_time(BASE, ARM, _measured(ARM, BASE)[:2])


def _results(path: Path, reqs: list[MeasuredRequest]) -> Path:
    rows = [
        {"sent_s": m.sent_s, "ttft_s": m.ttft_s, "tpot_s": m.tpot_s, "e2e_s": 1.0, "itl_s": [],
         "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "outcome": "completed"}
        for m in reqs
    ]  # fmt: skip
    path.write_text(json.dumps({"kind": "run", "run": {"requests": rows}}))
    return path


def test_sim_fit_spec_timings_writes_the_round_time(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """From the CLI: the acceptance from a /metrics dump, the round time from the
    speculative engine's bench results against the plain engine's on the same trace."""
    from tierctl.sim.accept_fit import fit_acceptance
    from tierctl.sim.cost import preset

    from .test_accept_fit import NGRAM, vllm_text

    dump = tmp_path / "metrics.txt"
    dump.write_text(vllm_text(1000, [800, 500, 300]))
    argv = ["vllm", "serve", "tiny", "--speculative-config", NGRAM]
    arm = EngineConfig.from_argv(argv)
    plain = EngineConfig.from_argv(["vllm", "serve", "tiny"])
    base = preset("dense-8b-h100")
    with_acc = dataclasses.replace(
        base, spec_accept_rate=fit_acceptance(dump.read_text(), "vllm", draft_steps=3).rate,
        spec_accept_by_position=(0.8, 0.625, 0.6),
    )  # fmt: skip
    truth = dataclasses.replace(with_acc, spec_draft_step_s=with_acc.spec_draft_step_s + 0.002)
    spec = _results(tmp_path / "spec.json", _measured(arm, truth))
    ref = _results(tmp_path / "ref.json", _measured(plain, truth))
    out = tmp_path / "m.json"
    res = run_cli(
        "sim", "fit", str(dump), "--preset", "dense-8b-h100", "--output", str(out),
        "--spec-timings", str(spec), "--spec-reference", str(ref),
        "--spec-reference-argv", "vllm serve tiny", "--", *argv,
    )  # fmt: skip
    assert res.code == 0, res.err
    assert "speculative round: +" in res.out
    model, prov = read_cost_model(out)
    assert model.spec_draft_step_s == pytest.approx(truth.spec_draft_step_s, rel=0.1)
    assert prov["spec_round_time"]["requests"] == 6
    half = run_cli(
        "sim", "fit", str(dump), "--preset", "dense-8b-h100", "--spec-timings", str(spec),
        "--spec-reference", str(ref), "--", *argv,
    )  # fmt: skip
    assert half.code == 2
    assert "go together" in half.err
