"""The iteration-log fit against a real vLLM engine (CPU, the tiny Llama): CI-sized form of
``benchmarks/sim_fidelity.py``'s log model.

One engine with ``--enable-logging-iteration-details``. The contract pinned exactly: the replay
of the real engine's log against the requests that produced it explains every step (vLLM's
scheduler is the first-come-first-served token-budget one the replay assumes). The prediction
of a held-out burst is bounded loosely (within 2x): on a shared 2-core CI machine step times move
from one minute to the next; the benchmark reports the actual errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realengine.fixtures import extra_engine
from tierctl.fidelity import (
    burst_plan,
    compare_figures,
    iteration_log_complete,
    measure,
    poisson_plan,
    predict,
)
from tierctl.runtime.polling import wait_until
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import DENSE_8B_H100
from tierctl.sim.iteration_fit import (
    fit_iterations,
    fit_overheads,
    parse_vllm_iterations,
    replay_iterations,
)

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

FLAGS = ("--max-num-seqs", "8", "--max-num-batched-tokens", "512")


@pytest.fixture(scope="module")
def logged_engine(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """An engine that logs every step."""
    log = tmp_path_factory.mktemp("vllm-iterations") / "engine.log"
    flags = (*FLAGS, "--enable-logging-iteration-details")
    with extra_engine(vllm_python, tiny_model, log, flags, "iterations") as engine:
        yield engine, log


def _played(logged: object, plan: list[object], seed: int) -> tuple[list[object], str]:
    """Play ``plan``; the measured requests and the engine log's lines they produced (polled
    until the log holds every step that served them: vLLM logs a step after it streamed)."""
    from tierctl.realengine.engine import SERVED_NAME

    engine, log = logged  # type: ignore[misc]
    mark = log.stat().st_size
    got = asyncio.run(measure(engine.url, SERVED_NAME, plan, seed=seed, timeout_s=600))  # type: ignore[attr-defined,arg-type]

    def since_mark() -> str:
        with log.open("rb") as fh:
            fh.seek(mark)
            return fh.read().decode(errors="replace")

    assert wait_until(lambda: iteration_log_complete(since_mark(), got), 30, poll_s=0.05)
    return list(got), since_mark()


def test_the_real_engines_log_replays_exactly_and_the_fit_predicts_a_burst(
    logged_engine: object,
) -> None:
    from tierctl.realengine.engine import BASE_FLAGS

    config = EngineConfig.from_argv(
        ["vllm", "serve", "tiny", *BASE_FLAGS, *FLAGS, "--num-gpu-blocks-override", "65536"]
    )
    base = dataclasses.replace(DENSE_8B_H100, kv_pool_tokens=1_000_000)
    _played(logged_engine, burst_plan(1, 600, 4), seed=99)  # warm-up
    plan = poisson_plan(random.Random(0), 2.0, 14, (32, 1200), (8, 40))
    fit_on, text = _played(logged_engine, plan, seed=1)
    its = parse_vllm_iterations(text)
    assert len(its) > 50
    shapes, mismatched = replay_iterations(its, fit_on, 512)  # type: ignore[arg-type]
    assert mismatched == 0
    assert sum(len(s.chunks) for s in shapes) >= len(plan)
    assert any(s.decode_context_tokens > 0 for s in shapes)
    steps = fit_iterations(its, base, name="ci", budget_tokens=512, requests=fit_on)  # type: ignore[arg-type]
    assert steps.prefill_per_token_s > 0
    model, res = fit_overheads(steps, fit_on, config, iterations=its, budget_tokens=512)  # type: ignore[arg-type]
    assert "measured" in res["between_steps"]
    assert 0 < model.request_overhead_s < 1.0
    held_out, _ = _played(logged_engine, burst_plan(6, 800, 16), seed=2)
    rows = {r.metric: r for r in compare_figures(held_out, predict(held_out, config, model))}  # type: ignore[arg-type]
    for metric in ("TTFT p50", "TPOT p50"):
        row = rows[metric]
        assert row.measured_s, metric
        assert row.predicted_s, metric
        assert 0.5 < row.predicted_s / row.measured_s < 2.0, (metric, row)
