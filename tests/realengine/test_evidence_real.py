"""The evidence holds on the real engines: a cache-free A/B, and a rollout with every gate on.

Against the session's real tier (``real_tier``: two vLLM engines on CPU, sglang-router,
Debian's Prometheus scraping both):

- ``bench ab`` between r1 and r2 with vLLM's prefix caching on (its default): vLLM's own
  ``prefix_cache_hits_total`` stays at 0 across the blocks, where the same A/B with the same
  prompts in every block (what it did before) has a large share of its prompt tokens served
  from cache. Counts of cache hits, not timings: robust on a busy 2-core machine.
- a gated rollout of r2 to the canary with the real Prometheus given to the gates: health,
  running args (vLLM's startup log, /v1/models, cache_config_info), metrics-variant, the soak
  with clients going through the router (the replica back in the router, so the soak judges
  real requests), and the collector step's ``prometheus-variants`` against the live server,
  whose series are named ``vllm:`` as vLLM exports them.

Budgets are generous; no test asserts a timing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from tests.realengine.fixtures import START_TIMEOUT_S
from tierctl.engines import VLLM
from tierctl.realtier.tier import CANARY_FLAG, RealTier
from tierctl.realtier.traffic import Traffic
from tierctl.rollout.entrypoints import make_plan
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.runtime.promtext import parse_metrics

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]


def _cache(urls: tuple[str, ...]) -> tuple[float, float]:
    """(prefix-cache hit tokens, looked-up tokens) summed over the engines' /metrics."""
    fam = VLLM.families()
    hits = queries = 0.0
    for url in urls:
        text = httpx.get(f"{url}/metrics", timeout=30).text
        samples = [(s.name, s.labels, s.value) for s in parse_metrics(text)]
        hits += VLLM.sample_total(samples, fam["prefix_cache_hits"]) or 0.0
        queries += VLLM.sample_total(samples, fam["prefix_cache_queries"]) or 0.0
    return hits, queries


def _ab(tier: RealTier, **kw: object) -> tuple[float, float]:
    from tierctl.bench.ab import run_ab
    from tierctl.bench.prompts import make_prompt_source
    from tierctl.bench.workload import workload_from_dict

    workload = workload_from_dict(
        {
            "name": "cache",
            "seed": 11,
            "model": tier.served_model,
            "api": "completions",
            "timeout_s": 300,
            "max_duration_s": 600,
            # Prompts of several of vLLM's cache blocks, so a repeated prompt can hit.
            "lanes": [{"kind": "burst", "count": 4, "input_tokens": 600, "output_tokens": 4}],
            "probe": {"enabled": False},
        }
    )
    prompts = make_prompt_source(str(tier.model / "tokenizer.json"), 11)
    urls = (tier.url("r1"), tier.url("r2"))
    before = _cache(urls)
    result = asyncio.run(run_ab(*urls, workload, prompts, order="ABBA", **kw))  # type: ignore[arg-type]
    after = _cache(urls)
    for block in result.blocks:
        assert block.record.count("completed") == 4, block.record.warnings
    return after[0] - before[0], after[1] - before[1]


def test_bench_ab_blocks_are_not_served_from_vllms_prefix_cache(real_tier: RealTier) -> None:
    # The same prompts in every block, as bench ab sent them before: each arm's second block
    # is served from the cache its first filled.
    hits, queries = _ab(real_tier, shared_prompts=True, run_id="shared")
    assert queries > 0
    assert hits > 0.3 * queries, (hits, queries)
    # By default each block's prompts lead with its own tokens: vLLM finds nothing cached,
    # neither from another block nor from the run before.
    hits, queries = _ab(real_tier)
    assert queries > 0
    assert hits == 0, (hits, queries)


def test_a_gated_rollout_with_the_real_prometheus_passes_every_gate(
    real_tier: RealTier, tmp_path: Path
) -> None:
    if real_tier.prometheus is None:
        pytest.fail("Debian's prometheus is not installed: `make test` runs ensure-prometheus")
    assert real_tier.router is not None
    target = real_tier.canary_args if real_tier.r2_args is None else None
    current = real_tier.write_side("gated-current", real_tier.r2_args)
    new = real_tier.write_side("gated-new", target)
    spec = real_tier.workdir / "gated-new.tier.yaml"
    plan = make_plan(str(current), str(new), spec=spec)
    old_dep, new_dep = load_sides(plan)
    gates = GateSettings(
        health_timeout_s=START_TIMEOUT_S,
        poll_interval_s=0.5,
        request_timeout_s=10,
        prometheus_url=real_tier.prometheus.url,
        metrics_timeout_s=180,
        soak_s=20,
    )
    journal = tmp_path / "journal.jsonl"
    with Traffic(real_tier.router.url, concurrency=2) as traffic:
        traffic.wait_for(4, timeout_s=300)
        result = run_rollout(
            plan, real_tier.driver, old_dep, new_dep, RolloutOptions(journal, gates=gates)
        )
    real_tier.r2_args = dict(target) if target else None
    steps = {o.step: o for o in result.outcomes}
    engine = next(s for s in plan.steps if s.role == "engine")
    collector = next(s for s in plan.steps if s.role == "collector")
    assert [o.status for o in result.outcomes] == ["done", "done"]
    notes = steps[engine.id].notes
    assert "health: 200" in notes
    assert any(n.startswith("running-args: ") for n in notes), notes
    assert any(n.startswith("metrics-variant: vllm metrics exported") for n in notes), notes
    # The soak ran with r2 back in the router, and judged the requests it served.
    assert any(n.startswith("soak: 20 s, error rate ") for n in notes), notes
    assert not any("no traffic" in n for n in notes), notes
    # The collector step (the tier's Prometheus reloaded with NEW's scrape config) checked
    # the live series, as vLLM names them.
    container = engine.container_name or engine.service
    assert steps[collector.id].notes == (
        f"prometheus: {container} reports {engine.variant} (vllm:num_requests_running)",
    )
    events = [
        json.loads(line)["event"]
        for line in journal.read_text().splitlines()
        if json.loads(line).get("step") == engine.id
    ]
    assert events == [
        "begin", "proxy-drained", "applied", "gates-passed", "proxy-restored", "soak-passed",
        "done",
    ], events  # fmt: skip
    assert traffic.result.failures == [], traffic.result.outcomes
    if target:
        from tierctl.engines.vllm import parse_non_default_args

        log = real_tier.driver.logs(new_dep, real_tier.service("r2"))
        args = parse_non_default_args(log or "")
        assert args is not None, "vLLM logs its non-default args at start-up"
        assert args["max_num_seqs"] == target[CANARY_FLAG]
