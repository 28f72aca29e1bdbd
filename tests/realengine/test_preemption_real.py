"""Preemption under KV pressure on a real vLLM engine (CPU, the tiny Llama) and in its model.

One engine whose KV pool is cut to 48 blocks of 16 tokens (``--num-gpu-blocks-override``):
eight requests arriving together, each fitting alone, cannot all decode at once, so vLLM
preempts (recompute) and counts it in the family the vLLM profile names. The same argv and
requests in the simulator preempt too, and the same requests with a roomy pool never do. The
counts are reported, not pinned: the engine's depend on how the burst's arrivals interleave.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.realengine.fixtures import extra_engine
from tierctl.engines import profile_for
from tierctl.runtime.promtext import metric_total, parse_metrics
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import DENSE_8B_H100
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

FLAGS = (
    "--num-gpu-blocks-override", "48", "--block-size", "16", "--max-num-seqs", "8",
    "--max-num-batched-tokens", "512", "--no-enable-prefix-caching", "--max-model-len", "512",
)  # fmt: skip
OUTPUT = 160


@pytest.fixture(scope="module")
def starved_engine(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("vllm-starved") / "engine.log"
    with extra_engine(vllm_python, tiny_model, log, FLAGS, "starved") as engine:
        yield engine


async def _burst(url: str) -> list[int]:
    from tierctl.realengine.engine import SERVED_NAME

    async def one(client: httpx.AsyncClient, i: int) -> int:
        prompt = " ".join(f"w{i}x{j}" for j in range(60))
        body = {"model": SERVED_NAME, "prompt": prompt, "max_tokens": OUTPUT,
                "temperature": 0, "ignore_eos": True}  # fmt: skip
        answer = await client.post(f"{url}/v1/completions", json=body, timeout=900)
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]
        assert usage["completion_tokens"] == OUTPUT  # nothing lost to the preemptions
        return int(usage["prompt_tokens"])

    async with httpx.AsyncClient() as client:
        return list(await asyncio.gather(*(one(client, i) for i in range(8))))


def test_a_starved_pool_preempts_on_the_engine_and_in_its_model(starved_engine: Any) -> None:
    prof = profile_for("vllm")
    name = prof.prefix + prof.sim_rules("0.32.0").metrics_preemption
    before = metric_total(parse_metrics(httpx.get(f"{starved_engine.url}/metrics").text), name)
    prompts = asyncio.run(_burst(starved_engine.url))
    after = metric_total(parse_metrics(httpx.get(f"{starved_engine.url}/metrics").text), name)
    real = (after or 0.0) - (before or 0.0)
    assert real > 0, "the engine did not preempt: the pool is not starved"
    load = Workload.of(
        "burst", [SimRequest(f"r{i}", 0.0, p, OUTPUT) for i, p in enumerate(prompts)]
    )
    argv = ["vllm", "serve", "m", *FLAGS]
    starved = simulate(EngineConfig.from_argv(argv), load, DENSE_8B_H100)
    roomy_argv = [*argv, "--num-gpu-blocks-override", "2000"]
    roomy = simulate(EngineConfig.from_argv(roomy_argv), load, DENSE_8B_H100)
    print(f"preemptions: engine {real:.0f}, model {starved.summary.preemptions}, roomy model 0")
    assert starved.summary.preemptions > 0
    assert roomy.summary.preemptions == 0
    assert starved.summary.completion == roomy.summary.completion == 1.0
