"""The simulation work bound (issue #22): no option or file makes a simulation run for minutes.

Reproducers: ``sim run --workload hammer --rate 65536 --duration-s 5`` simulated 327,680
requests in 73 s of CPU (sweep seed 2026120209 input 13310); ``--workload burst --count
1000000``, ``--workload day --hours 744`` and ``--workload ingestion --duration-s 1e8`` ran
past 60 s (the last took 5.5 GB building its workload). Each is now refused at once, with the
estimate, the bound and the variable that raises it; the estimate's laws are property-tested.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import CliResult
from tests.unit.sim.helpers import FLAT, cfg, cpu_budget
from tierctl.errors import InputError
from tierctl.sim import budget
from tierctl.sim.costfile import write_cost_model
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

RunCli = Callable[..., CliResult]


def _reqs(*shapes: tuple[int, int]) -> list[SimRequest]:
    return [SimRequest(f"r{i}", 0.1 * i, p, o) for i, (p, o) in enumerate(shapes)]


def test_the_estimate_counts_requests_prefill_steps_and_stepped_decode() -> None:
    arm = cfg("--chunked-prefill-size", "1000", "--max-running-requests", "4")
    reqs = _reqs((1000, 11), (2500, 21))
    est = budget.estimate(arm, reqs, FLAT)
    # 3,500 prompt tokens at 1,000 a step; decode runs in closed form (no jitter): not counted.
    assert (est.requests, est.prefill_steps, est.decode_rounds) == (2, 4, 0)
    assert est.units == budget.REQUEST_UNITS * 2 + 4
    jittery = dataclasses.replace(FLAT, step_jitter=0.1)
    est = budget.estimate(arm, reqs, jittery)
    # 30 tokens after the first ones, 4 a round at most: 8 stepped rounds.
    assert (est.decode_rounds, est.decode_tokens) == (8, 30)
    assert est.times(3).units == 3 * est.units


def test_check_refuses_past_the_bound_and_names_the_way_out() -> None:
    est = budget.WorkEstimate(requests=10, prefill_steps=60)
    budget.check(est, 100)  # exactly at the bound: runs
    with pytest.raises(InputError) as info:
        budget.check(est, 99)
    text = info.value.format()
    assert "100 scheduler steps" in text
    assert "past the bound of 99" in text
    assert f"{budget.ENV}=100" in text


def test_the_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(budget.ENV, raising=False)
    assert budget.limit() == budget.DEFAULT_MAX_STEPS
    monkeypatch.setenv(budget.ENV, "5_000")
    assert budget.limit() == 5000
    assert budget.runtime_bound() == budget.RUNTIME_FACTOR * 5000
    for bad in ("nan", "-3", "0", "1e9"):
        monkeypatch.setenv(budget.ENV, bad)
        with pytest.raises(InputError, match=budget.ENV):
            budget.limit()


def test_simulate_refuses_up_front_and_the_backstop_stops_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arm = cfg("--chunked-prefill-size", "1000")
    wl = Workload.of("w", _reqs(*[(5000, 4)] * 20))  # 100 prefill steps + 80 request units
    monkeypatch.setenv(budget.ENV, "150")
    with pytest.raises(InputError, match="too large to run"):
        simulate(arm, wl, FLAT)
    res = simulate(arm, wl, FLAT, check_work=False, max_steps=30)
    assert "stopped after 30 scheduler steps" in res.stopped
    monkeypatch.setenv(budget.ENV, "400")
    assert simulate(arm, wl, FLAT).stopped == ""


@settings(max_examples=40, deadline=None)
@given(
    shapes=st.lists(st.tuples(st.integers(1, 9000), st.integers(1, 60)), min_size=1, max_size=12),
    chunk=st.sampled_from([256, 1000, 4096]),
    batch=st.integers(1, 8),
    engine=st.sampled_from(["sglang", "vllm"]),
)
def test_the_estimate_is_a_lower_bound_on_the_steps_run(
    shapes: list[tuple[int, int]], chunk: int, batch: int, engine: str
) -> None:
    """Law: without shared prefixes no simulation runs fewer prefill steps or decode rounds
    than estimated (so a refusal never turns away a run that would have been short)."""
    if engine == "sglang":
        arm = cfg("--chunked-prefill-size", str(chunk), "--max-running-requests", str(batch))
    else:
        from tierctl.sim.config import EngineConfig

        arm = EngineConfig.from_argv(
            ["vllm", "serve", "m", "--max-num-batched-tokens", str(max(chunk, 9100)),
             "--max-num-seqs", str(batch), "--num-gpu-blocks-override", "100000"],
            engine="vllm", version="0.32.0",
        )  # fmt: skip
    model = dataclasses.replace(FLAT, step_jitter=0.05, kv_pool_tokens=10_000_000)
    wl = Workload.of("w", _reqs(*shapes))
    est = budget.estimate(arm, wl.requests, model)
    res = simulate(arm, wl, model, check_work=False)
    assert res.stopped == ""
    assert res.prefill_rounds >= est.prefill_steps
    assert res.rounds - res.prefill_rounds >= est.decode_rounds - len(shapes)


@pytest.mark.parametrize(
    "argv",
    [
        ("--workload", "hammer", "--rate", "65536", "--duration-s", "5"),
        ("--workload", "burst", "--count", "20000"),
        ("--workload", "day", "--hours", "744"),
        ("--workload", "ingestion", "--duration-s", "1e8"),
    ],
)
def test_sim_run_refuses_a_long_simulation_at_once(run_cli: RunCli, argv: tuple[str, ...]) -> None:
    with cpu_budget(15.0):
        r = run_cli("sim", "run", *argv)
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    assert "out of range" in r.err or budget.ENV in r.err


def test_sim_compare_checks_the_sum_of_its_draws(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run fits the bound; the comparison's 2 + 3 x draws runs do not."""
    path = tmp_path / "cost.json"
    write_cost_model(path, dataclasses.replace(FLAT, name="jittery", step_jitter=0.1), {})
    arm = cfg("--chunked-prefill-size", "1000")
    wl_args = ("--workload", "burst", "--count", "4", "--input-tokens", "4000",
               "--output-tokens", "8")  # fmt: skip
    one = budget.estimate(arm, [SimRequest("x", 0, 4000, 8)] * 4, FLAT).units
    monkeypatch.setenv(budget.ENV, str(one * 10))
    r = run_cli("sim", "run", "--cost-model", str(path), *wl_args)
    assert r.code == 0, r.err
    r = run_cli(
        "sim", "compare", "--cost-model", str(path), "--draws", "20", *wl_args,
        "--control", "python -m sglang.launch_server --chunked-prefill-size 1000",
        "--candidate", "python -m sglang.launch_server --chunked-prefill-size 2000",
    )  # fmt: skip
    assert r.code == 2, r.out + r.err
    assert "62 simulated runs" in r.err


def test_a_streamed_trace_is_charged_for_what_a_row_amplifies(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """A row is the user's input (its allowance); a row of 2e9 prompt tokens is not."""
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": i * 100, "input_length": 2_000_000_000, "output_length": 4}
            for i in range(2)]  # fmt: skip
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with cpu_budget(15.0):
        r = run_cli("sim", "run", "--trace", str(trace), "--trace-format", "mooncake", "--",
                    "python", "-m", "sglang.launch_server", "--max-total-tokens", "4000000000",
                    "--chunked-prefill-size", "512")  # fmt: skip
    assert r.code == 2, r.out + r.err
    assert "replaying the trace (to row 1)" in r.err
    # The default pool refuses such a prompt at submit: no work, and it runs at once.
    with cpu_budget(15.0):
        r = run_cli("sim", "run", "--trace", str(trace), "--trace-format", "mooncake")
    assert r.code == 0, r.err
    assert "exceed the KV pool" in r.out


def test_two_arms_work_adds_up_over_their_runs() -> None:
    a = budget.WorkEstimate(requests=2, prefill_steps=10).times(3)
    b = budget.WorkEstimate(requests=1, prefill_steps=5, decode_rounds=7).times(2)
    assert a.plus(b).units == a.units + b.units
    assert a.plus(b).runs == 1
