"""`tierctl demo --quick` on the vLLM example: the offline what-if fits the tier's context."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tierctl.sim.workload import field_burst

VLLM_SPEC = Path(__file__).resolve().parents[2] / "examples" / "vllm-llama70b" / "tier.yaml"


def test_the_quick_demo_sizes_the_field_burst_to_the_vllm_tiers_context(
    run_cli: Callable[..., CliResult],
) -> None:
    result = run_cli("demo", "--quick", "--spec", str(VLLM_SPEC))
    assert result.code == 0, result.out + result.err
    out = " ".join(result.out.split())
    assert "exceed this tier's context (32768 tokens)" in out
    assert "8 x ~32K-token (the tier's context limit) burst" in out
    # --max-num-seqs 256 vs 512 does not bind with 11 requests: the ratios say so (1.00).
    assert "TTFT p50" in out


def test_a_capped_field_burst_keeps_its_shape_and_fits_the_limit() -> None:
    full = field_burst(random.Random(0))
    capped = field_burst(random.Random(0), max_total_tokens=32_768)
    assert [r.rid for r in capped.requests] == [r.rid for r in full.requests]
    assert [r.arrival_s for r in capped.requests] == [r.arrival_s for r in full.requests]
    assert max(r.input_tokens + r.output_tokens for r in capped.requests) <= 32_768
    longest = max(r.input_tokens for r in capped.requests if r.rid.startswith("burst"))
    assert longest > 30_000  # as long as the limit allows, not arbitrarily short
    # Without a limit nothing changes: the field report's ~720K-token prompts.
    assert min(r.input_tokens for r in full.requests if r.rid.startswith("burst")) > 700_000
