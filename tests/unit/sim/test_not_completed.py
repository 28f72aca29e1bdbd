"""``sim compare``/``sim run`` say why requests did not complete and which cost model they
used: a completion of 0.273 alone hides that 8 of 11 prompts exceed a 4,096-token context."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tierctl.sim.config import EngineConfig
from tierctl.sim.result import not_completed
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import generate

TINY = Path(__file__).parents[3] / "examples" / "tiny-vllm" / "tier.yaml"
ARGS = ("sim", "compare", "--spec", str(TINY), "--control-replica", "r1", "--workload", "field")


def test_compare_on_a_short_context_tier_says_which_prompts_exceed_it(
    run_cli: Callable[..., Any],
) -> None:
    res = run_cli(*ARGS, "--candidate-replica", "r2")
    assert res.code == 0, res.err
    assert "completion       0.273" in res.out
    assert (
        "both arms: 8 of 11 requests did not complete: 8 prompt + output exceed the context "
        "(max-model-len 4096)"
    ) in res.out
    assert "cost model: glm53-flash-w4afp8-tp4-h200 (the default preset;" in res.out
    doc = json.loads(run_cli(*ARGS, "--candidate-replica", "r2", "--format", "json").out)
    assert doc["not_completed"]["control"] == {
        "prompt + output exceed the context (max-model-len 4096)": 8
    }
    assert doc["cost_model"]["name"] == "glm53-flash-w4afp8-tp4-h200"
    assert "warning: the control's figures are judged from 3 of 11 requests: 8 refused" in res.err


def test_the_default_workload_that_does_not_fit_the_tier_is_refused(
    run_cli: Callable[..., Any],
) -> None:
    # Issue #40: on a user's own tier the default (the bundled long-context example) judged
    # from 3 of 11 requests, silently.
    res = run_cli(*ARGS[:-2], "--candidate-replica", "r2")
    assert res.code == 2
    assert "the default workload (the bundled long-context example) does not fit" in res.err
    assert "8 of its 11 requests are refused" in res.err
    assert "--workload burst --count N" in res.err
    fits = run_cli(*ARGS[:-2], "--candidate-replica", "r2", "--workload", "burst", "--count",
                   "3", "--input-tokens", "1000", "--output-tokens", "16")  # fmt: skip
    assert fits.code == 0, fits.err
    assert "judged from" not in fits.err


def test_size_options_the_workload_does_not_read_are_refused_not_dropped(
    run_cli: Callable[..., Any],
) -> None:
    base = ("sim", "compare", "--control", "vllm serve m", "--candidate",
            "vllm serve m --max-num-seqs 4", "--preset", "dense-8b-h100")  # fmt: skip
    for extra, flag in (
        (("--count", "4"), "--count"),
        (("--input-tokens", "300"), "--input-tokens"),
        (("--workload", "hammer", "--count", "4"), "--count"),
        (("--workload", "burst", "--rate", "3"), "--rate"),
        (("--workload", "day", "--duration-s", "30"), "--duration-s"),
    ):
        res = run_cli(*base, *extra)
        assert res.code == 2, extra
        assert f"{flag} is not read by --workload" in res.err, res.err
    ok = run_cli(*base, "--workload", "burst", "--count", "2", "--input-tokens", "300",
                 "--output-tokens", "4")  # fmt: skip
    assert ok.code == 0, ok.err
    # The count is honoured: two requests, not the default eight.
    doc = json.loads(run_cli(*base, "--workload", "burst", "--count", "2", "--input-tokens",
                             "300", "--output-tokens", "4", "--json").out)  # fmt: skip
    assert doc["control"]["requests"] == 2


def test_a_chosen_preset_is_named_as_chosen(run_cli: Callable[..., Any]) -> None:
    res = run_cli(*ARGS, "--candidate-replica", "r2", "--preset", "dense-8b-h100")
    assert res.code == 0, res.err
    assert "cost model: dense-8b-h100 (--preset)" in res.out


def test_a_full_queue_and_a_kv_pool_too_small_have_their_own_reasons() -> None:
    preset = "glm53-flash-w4afp8-tp4-h200"
    config = EngineConfig.from_argv(["--max-queued-requests", "2"], engine="sglang")
    burst = generate("burst", 0, count=6, input_tokens=2_000_000, output_tokens=8)
    queued = simulate(config, burst, preset)
    done = sum(r.status == "completed" for r in queued.requests)
    assert not_completed(queued.requests) == {"queue full (max-queued-requests 2)": 6 - done}
    huge = generate("burst", 0, count=1, input_tokens=10**9, output_tokens=8)
    refused = not_completed(simulate(config, huge, preset).requests)
    assert list(refused.values()) == [1]
    assert next(iter(refused)).startswith("prompt + output exceed the KV pool")


def test_run_says_why_too(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "run", "--workload", "burst", "--count", "2", "--input-tokens", "9000",
                  "--", "--context-length", "4096")  # fmt: skip
    assert res.code == 0, res.err
    assert "cost model: glm53-flash-w4afp8-tp4-h200" in res.out
