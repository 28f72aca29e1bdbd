"""Intervals, the A/A floor, verdicts, and the fit's domain on every what-if."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.config import EngineConfig
from tierctl.sim.domain import StepDomain, domain_of
from tierctl.sim.engine import Round
from tierctl.sim.simulate import simulate
from tierctl.sim.steplog import write_steps
from tierctl.sim.uncertainty import FitUncertainty, block_bootstrap, what_if
from tierctl.sim.workload import SimRequest, Workload, hammer

from .helpers import FLAT

JITTERY = dataclasses.replace(FLAT, name="jittery", step_jitter=0.2, round_overhead_s=1e-3)


def vcfg(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["vllm", "serve", "m", "--max-model-len", "8192", *flags])


def _hammer(rate: float = 6.0) -> Workload:
    return hammer(
        random.Random(1),
        rate_per_s=rate,
        duration_s=20,
        input_tokens=(400, 800),
        output_tokens=(30, 50),
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(1, 8), st.integers(0, 10**6))
def test_block_bootstrap_draws_contiguous_blocks_of_the_right_total(
    n: int, k: int, seed: int
) -> None:
    draws = block_bootstrap(n, k, seed)
    assert len(draws) == k
    for idx in draws:
        assert len(idx) == n
        assert all(0 <= i < n for i in idx)
        # each index is a block's start or follows its predecessor
        runs = sum(1 for a, b in itertools.pairwise(idx) if b != a + 1)
        assert runs <= n // max(1, round(n**0.5)) + 1


def test_a_deterministic_model_gives_point_ratios_judged_against_the_default_floor() -> None:
    wi = what_if(vcfg("--max-num-seqs", "8"), vcfg("--max-num-seqs", "2"), _hammer(), FLAT)
    assert wi.draws == 1
    assert "no intervals" in wi.uncertainty
    rows = {r.metric: r for r in wi.rows}
    assert rows["TTFT p50"].low == rows["TTFT p50"].high == rows["TTFT p50"].ratio
    assert rows["completion"].verdict == "no measurable effect"


def test_identical_arms_are_no_measurable_effect_with_intervals_around_one() -> None:
    wi = what_if(vcfg(), vcfg(), _hammer(), JITTERY, draws=12)
    assert wi.draws == 12
    for r in wi.rows:
        if r.low is None:
            continue
        assert r.verdict == "no measurable effect", r
        assert r.low <= 1.0 <= r.high or r.low == r.high == 1.0


def test_a_real_effect_is_called_with_an_interval_that_excludes_one() -> None:
    # Two running at most against eight, at a rate eight keep up with: TTFT queues.
    wi = what_if(vcfg("--max-num-seqs", "8"), vcfg("--max-num-seqs", "2"), _hammer(8.0), JITTERY,
                 draws=12)  # fmt: skip
    row = next(r for r in wi.rows if r.metric == "TTFT p95")
    assert row.verdict == "worse", row
    assert row.low is not None
    assert row.low > 1.0 + row.floor


def _fit_file(tmp_path: Path, budget: str) -> Path:
    """A step log simulated at a 512-token budget, fitted by `sim fit`."""
    rounds: list[Round] = []
    reqs = [SimRequest(f"r{i}", 0.3 * i, 300 + 97 * i, 20) for i in range(30)]
    simulate(vcfg("--max-num-batched-tokens", budget), Workload.of("fit", reqs), JITTERY,
             seed=3, steps=rounds)  # fmt: skip
    steps = tmp_path / "steps.jsonl"
    write_steps(rounds, steps)
    return steps


def test_sim_fit_records_its_domain_and_bootstrap_refits(
    tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    steps = _fit_file(tmp_path, "512")
    out = tmp_path / "m.json"
    res = run_cli("sim", "fit", str(steps), "--from", "steps", "--output", str(out))
    assert res.code == 0, res.err
    prov = json.loads(out.read_text())["provenance"]
    assert prov["domain"]["step_tokens"] <= 512
    assert prov["domain"]["batch"] >= 2
    assert len(prov["uncertainty"]["samples"]) == 40
    from tierctl.sim.costfile import read_cost_model

    model, p = read_cost_model(out)
    fit = FitUncertainty.from_provenance(model, p)
    assert len(fit.samples) == 40
    assert len({s.prefill_per_token_s for s in fit.samples}) > 1  # the refits differ


def test_compare_prints_intervals_and_says_when_it_extrapolates(
    tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    steps = _fit_file(tmp_path, "512")
    out = tmp_path / "m.json"
    assert run_cli("sim", "fit", str(steps), "--from", "steps", "--output", str(out)).code == 0
    doc = json.loads(out.read_text())
    doc["model"]["step_jitter"] = 0.15
    out.write_text(json.dumps(doc))
    base = "vllm serve m --max-model-len 8192 --max-num-batched-tokens 512"
    res = run_cli("sim", "compare", "--cost-model", str(out), "--draws", "8",
                  "--control", base, "--candidate", base.replace("512", "2048"),
                  "--workload", "burst", "--count", "4", "--input-tokens", "3000",
                  "--output-tokens", "8")  # fmt: skip
    assert res.code == 0, res.err
    assert "intervals: 8 draws of the fit's 40 bootstrap refits" in res.out
    ttft = next(line for line in res.out.splitlines() if line.startswith("TTFT p50"))
    assert "[" in ttft
    assert "]" in ttft
    assert "extrapolates beyond the fit: steps of 2,048 prompt tokens; the fit saw <= 512" in (
        res.out
    )
    same = run_cli("sim", "compare", "--cost-model", str(out), "--draws", "8",
                   "--control", base, "--candidate", base, "--workload", "burst", "--count", "4",
                   "--input-tokens", "3000", "--output-tokens", "8", "--format", "json")  # fmt: skip
    table = json.loads(same.out)["table"]
    assert {r["verdict"] for r in table} <= {"no measurable effect", "unknown"}
    # Same budget as the fit: no step past its size (the step log keeps pure prefill steps
    # only, so deep chunks of mixed steps may still be named).
    assert not [x for x in json.loads(same.out)["extrapolation"] if x.startswith("steps of")]


def test_domain_beyond_names_only_the_shapes_past_the_fit() -> None:
    fit = domain_of([(((512, 0),), 0, 0), ((), 8, 4000)])
    assert fit == StepDomain(512, 0, 8, 4000)
    seen = StepDomain(step_tokens=2048, position=0, batch=9, context=4000)
    assert seen.beyond(fit) == ["steps of 2,048 prompt tokens; the fit saw <= 512"]
    assert StepDomain.from_json({"step_tokens": "x"}) is None


def test_fit_plan_spans_what_both_arms_produce(tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    from tierctl.sim.fit_plan import fit_plan
    from tierctl.sim.workload import burst

    control = vcfg("--max-num-batched-tokens", "512", "--max-num-seqs", "8")
    candidate = vcfg("--max-num-batched-tokens", "2048", "--max-num-seqs", "8")
    wl = burst(random.Random(0), count=4, input_tokens=3000, output_tokens=8, jitter=0)
    plan = fit_plan(control, candidate, wl, FLAT)
    assert plan.argv_flags == ("--max-num-batched-tokens", "2048", "--max-num-seqs", "8")
    # The plan, run at the fit argv, sees every shape either arm produces: no extrapolation.
    fit_cfg = vcfg(*plan.argv_flags)
    seen = StepDomain.from_json(simulate(fit_cfg, plan.workload, FLAT).domain)
    assert seen is not None
    assert plan.domain.beyond(seen) == []
    out = tmp_path / "plan.jsonl"
    res = run_cli("sim", "fit-plan", "--preset", "dense-8b-h100", "--control",
                  "vllm serve m --max-model-len 8192 --max-num-batched-tokens 512",
                  "--candidate", "vllm serve m --max-model-len 8192 --max-num-batched-tokens 2048",
                  "--workload", "burst", "--count", "4", "--input-tokens", "3000",
                  "--output-tokens", "8", "--output", str(out))  # fmt: skip
    assert res.code == 0, res.err
    assert "run the fit engine with: --max-num-batched-tokens 2048" in res.out
    assert out.read_text().count("\n") >= 10
    again = run_cli("sim", "fit-plan", "--control", "--chunked-prefill-size 512", "--candidate",
                    "--chunked-prefill-size 2048", "--output", str(steps_file := out),
                    "--workload", "burst", "--count", "2", "--input-tokens", "3000")  # fmt: skip
    assert again.code == 2, again.out  # never overwrites without --force
    assert steps_file.exists()
