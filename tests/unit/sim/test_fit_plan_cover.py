"""A fit run that covers several arms and workloads (``fit_plan_cover``), and the second run a
larger budget needs for the smaller budget's deep chunks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tierctl.sim.config import EngineConfig
from tierctl.sim.domain import StepDomain
from tierctl.sim.fit_plan import fit_plan_cover
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

from .helpers import FLAT

COST = dataclasses.replace(FLAT, kv_pool_tokens=1_000_000)


def cfg(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["vllm", "serve", "m", "--max-model-len", "4096", *flags])


def _seen(flags: tuple[str, ...], wl: Workload) -> StepDomain:
    return StepDomain.from_json(simulate(cfg(*flags), wl, COST).domain) or StepDomain()


def test_one_plan_covers_every_arm_and_workload_with_runs_at_each_budget() -> None:
    arms = [
        cfg("--max-num-batched-tokens", "512", "--max-num-seqs", "8"),
        cfg(
            "--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill", "--max-num-seqs", "8"
        ),
        cfg("--max-num-batched-tokens", "512", "--max-num-seqs", "16"),
    ]
    long_prompts = Workload.of("long", [SimRequest(f"l{i}", i * 0.5, 2600, 16) for i in range(3)])
    many = Workload.of("many", [SimRequest(f"m{i}", 0.0, 300, 32) for i in range(14)])
    plan = fit_plan_cover(arms, [long_prompts, many], COST)
    assert plan.budget_tokens == 4096
    assert plan.max_running == 16
    # No prompt longer than the context (vLLM answers 400 and the fit run fails).
    assert max(r.input_tokens + r.output_tokens for r in plan.workload.requests) <= 4096
    # A 4,096-token budget takes every prompt that fits the context in one step: the 512
    # arm's chunks 2,560 deep need a second run at 512.
    assert len(plan.more_runs) == 1
    flags, ladder = plan.more_runs[0]
    assert flags[:2] == ("--max-num-batched-tokens", "512")
    seen = _seen(plan.argv_flags, plan.workload).union(_seen(flags, ladder))
    assert plan.domain.beyond(seen) == []
    # and the first run alone would not have covered it
    assert any("deep" in line for line in plan.domain.beyond(_seen(plan.argv_flags, plan.workload)))


def test_no_second_run_when_the_fit_budget_already_cuts_deep_chunks() -> None:
    arms = [cfg("--max-num-batched-tokens", "512"), cfg("--max-num-batched-tokens", "1024")]
    wl = Workload.of("long", [SimRequest("l", 0.0, 2600, 16)])
    plan = fit_plan_cover(arms, [wl], COST)
    assert plan.more_runs == ()
    assert plan.domain.beyond(_seen(plan.argv_flags, plan.workload)) == []


def test_fit_plan_cli_names_the_second_run(run_cli: Callable[..., Any], tmp_path: Any) -> None:
    out = tmp_path / "plan.jsonl"
    res = run_cli("sim", "fit-plan", "--preset", "dense-8b-h100", "--control",
                  "vllm serve m --max-model-len 4096 --max-num-batched-tokens 512",
                  "--candidate", "vllm serve m --max-model-len 4096 --max-num-batched-tokens "
                  "4096 --no-enable-chunked-prefill", "--workload", "burst", "--count", "2",
                  "--input-tokens", "2600", "--output-tokens", "8", "--output", str(out))  # fmt: skip
    assert res.code == 0, res.err
    assert "and a second fit run with: --max-num-batched-tokens 512" in res.out
    assert (tmp_path / "plan.jsonl.run2.jsonl").exists()
