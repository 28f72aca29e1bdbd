"""`bench ab`'s blocks share no cached prefix: two simulated vLLM engines, prefix caching on.

vLLM caches prefixes by default. With the same prompts in every block, each block after an
arm's first was served from that arm's cache (on the real tier 16,896 of 24,008 prompt tokens
of the canary hit), and the ratio measured the cache. The simulated engine counts its prefix
cache lookups and hits as vLLM does (``vllm:prefix_cache_queries_total`` / ``_hits_total``);
this test reads them around an A/B. The same assertion against real vLLM is in
``tests/realengine/test_evidence_real.py``.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from tests.integration.sim_process import sim_process
from tierctl.bench.ab import run_ab
from tierctl.bench.prompts import make_prompt_source
from tierctl.bench.workload import workload_from_dict
from tierctl.engines import VLLM
from tierctl.runtime.promtext import parse_metrics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "m"


def vllm_sim(env: dict[str, str] | None = None) -> AbstractAsyncContextManager[str]:
    """A `tierctl sim serve` answering as vLLM (prefix caching on, as vLLM's default)."""
    command = ["vllm", "serve", "/models/m", "--served-model-name", MODEL]
    return sim_process([*command, "--host", "127.0.0.1", "--port", "0"], time_scale=50, env=env)


def _cache(urls: tuple[str, ...]) -> tuple[float, float]:
    """(prefix-cache hit tokens, looked-up tokens) summed over the engines, from /metrics."""
    fam = VLLM.families()
    hits = queries = 0.0
    for url in urls:
        samples = [
            (s.name, s.labels, s.value) for s in parse_metrics(httpx.get(f"{url}/metrics").text)
        ]
        hits += VLLM.sample_total(samples, fam["prefix_cache_hits"]) or 0.0
        queries += VLLM.sample_total(samples, fam["prefix_cache_queries"]) or 0.0
    return hits, queries


WORKLOAD = {
    "name": "cache",
    "seed": 3,
    "model": MODEL,
    "timeout_s": 120,
    "max_duration_s": 120,
    "lanes": [{"kind": "burst", "count": 4, "input_tokens": 600, "output_tokens": 4}],
    "probe": {"enabled": False},
}


async def _ab(a: str, b: str, **kw: object) -> tuple[float, float, object]:
    before = await asyncio.to_thread(_cache, (a, b))
    result = await run_ab(
        a, b, workload_from_dict(WORKLOAD), make_prompt_source("sim", 3), order="ABBA", **kw
    )  # type: ignore[arg-type]
    after = await asyncio.to_thread(_cache, (a, b))
    assert all(bl.record.count("completed") == 4 for bl in result.blocks)
    return after[0] - before[0], after[1] - before[1], result


async def test_no_block_is_served_from_another_blocks_prefix_cache() -> None:
    async with vllm_sim() as a, vllm_sim() as b:
        # As before: the same prompts in every block. The second block of each arm hits.
        hits, queries, _ = await _ab(a, b, shared_prompts=True, run_id="x")
        assert queries > 0
        assert hits > 0.3 * queries, (hits, queries)
        # By default each block leads with its own tokens: nothing is served from cache...
        hits, queries, result = await _ab(a, b, run_id="y")
        assert hits == 0, (hits, queries)
        assert result.warnings == ()  # type: ignore[attr-defined]
        # ...nor in a second run against the same, now warm, engines.
        hits, _, _ = await _ab(a, b)
        assert hits == 0


async def test_a_flush_the_engine_refuses_is_a_warning_naming_what_it_needs() -> None:
    async with vllm_sim() as a, vllm_sim({"VLLM_SERVER_DEV_MODE": "1"}) as b:
        _, _, result = await _ab(a, b, flush=True, run_id="z")
    blocks = result.blocks  # type: ignore[attr-defined]
    # B (development mode) has vLLM's /reset_prefix_cache; A answers 404 on every block.
    assert {bl.flush for bl in blocks if bl.arm == "B"} == {"ok"}
    assert {bl.flush for bl in blocks if bl.arm == "A"} == {
        "unsupported (POST /reset_prefix_cache: HTTP 404)"
    }
    (warning,) = result.warnings  # type: ignore[attr-defined]
    assert warning.startswith(f"arm A ({a}): the prefix-cache flush asked for (`flush`)")
    assert "in 2 of 2 block(s)" in warning
    assert "VLLM_SERVER_DEV_MODE=1" in warning
