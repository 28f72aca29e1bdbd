"""The what-if pipeline on a real vLLM engine (CPU, the tiny Llama): the CI-sized form of
``benchmarks/sim_whatif.py``'s fit.

One engine, started at the fit flags ``sim fit-plan``'s design asks for (the larger budget
of the two arms) with ``--enable-logging-iteration-details``, plays the designed fit trace.
Pinned: the real log replays against the trace's requests step for step; the fitted model
(``sim fit --from vllm-log --timings``'s fit) records bootstrap refits and a domain that
holds every shape the plan promised to cover, so ``sim compare`` on the two arms says
nothing extrapolates; and its intervals hold their point ratio. The A/B itself is the
benchmark's (several engine starts do not fit a CI budget).
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.realengine.fixtures import extra_engine
from tierctl.fidelity import PlannedSend, burst_plan, iteration_log_complete, measure
from tierctl.runtime.polling import wait_until
from tierctl.sim.config import EngineConfig
from tierctl.sim.costfile import write_cost_model
from tierctl.sim.domain import StepDomain
from tierctl.sim.fit_plan import fit_plan_cover
from tierctl.sim.fitting import fit_vllm_log
from tierctl.sim.iteration_fit import parse_vllm_iterations
from tierctl.sim.workload import SimRequest, Workload
from tierctl.sim.workload_traces import write_jsonl

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

F0 = ("--max-num-seqs", "4", "--max-num-batched-tokens", "512")
CANDIDATE = ("--max-num-seqs", "4", "--max-num-batched-tokens", "1024")


def _argv(flags: tuple[str, ...]) -> list[str]:
    from tierctl.realengine.engine import BASE_FLAGS

    return ["vllm", "serve", "tiny", *BASE_FLAGS, *flags, "--num-gpu-blocks-override", "65536"]


def _cfg(flags: tuple[str, ...]) -> EngineConfig:
    return EngineConfig.from_argv(_argv(flags), engine="vllm", version="0.32.0")


def test_a_designed_fit_covers_both_arms_on_the_real_engine(
    vllm_python: Path,
    tiny_model: Path,
    tmp_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from sim_whatif import planning_cost  # the benchmark's rough CPU model for the spacing

    question = Workload.of(
        "q",
        [SimRequest("d-0", 0.0, 32, 24), SimRequest("d-1", 0.0, 32, 24)]
        + [SimRequest(f"l-{i}", 0.2 + 0.4 * i, 1100, 8) for i in range(2)],
    )
    plan = fit_plan_cover([_cfg(F0), _cfg(CANDIDATE)], [question], planning_cost())
    assert plan.budget_tokens == 1024
    flags = (*F0, *plan.argv_flags, "--enable-logging-iteration-details")
    sends = [PlannedSend(r.arrival_s, r.input_tokens, r.output_tokens) for r in
             plan.workload.requests]  # fmt: skip
    log = tmp_path / "engine.log"
    with extra_engine(vllm_python, tiny_model, log, flags, "whatif-fit") as engine:
        from tierctl.realengine.engine import SERVED_NAME

        url = engine.url  # type: ignore[attr-defined]
        asyncio.run(measure(url, SERVED_NAME, burst_plan(1, 600, 4), seed=99))
        mark = log.stat().st_size
        got = asyncio.run(measure(url, SERVED_NAME, sends, seed=1, timeout_s=600))

        def since() -> str:
            with log.open("rb") as fh:
                fh.seek(mark)
                return fh.read().decode(errors="replace")

        assert wait_until(lambda: iteration_log_complete(since(), got), 30, poll_s=0.05)
    its = parse_vllm_iterations(since())
    fit_cfg = _cfg((*F0, *plan.argv_flags))
    model, prov = fit_vllm_log(its, planning_cost(), fit_cfg, got, name="ci", fitted_on=["ci"])
    assert prov["residuals"]["replay_mismatched_steps"] == 0
    assert len(prov["uncertainty"]["samples"]) == 40
    seen = StepDomain.from_json(prov["domain"])
    assert seen is not None
    # The real fit run produced every shape the plan set out to cover (within the quarter of
    # slack sim compare allows before it calls a shape an extrapolation).
    assert plan.domain.beyond(seen) == [], (plan.domain, seen)
    model_file = write_cost_model(tmp_path / "m.json", model, prov)
    trace = tmp_path / "q.jsonl"
    write_jsonl(question, trace)
    out = run_cli(
        "sim", "compare", "--cost-model", str(model_file), "--trace", str(trace),
        "--engine", "vllm", "--engine-version", "0.32.0", "--control", shlex.join(_argv(F0)),
        "--candidate", shlex.join(_argv(CANDIDATE)), "--draws", "10", "--format", "json",
    )  # fmt: skip
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert doc["extrapolation"] == []
    assert "bootstrap" in doc["uncertainty"]
    rows = {r["metric"]: r for r in doc["table"]}
    for metric in ("TTFT p50", "TTFT p95", "TPOT p50", "TPOT p90"):
        r = rows[metric]
        assert r["low"] <= r["ratio"] <= r["high"], r
