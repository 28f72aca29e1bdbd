"""Issue #40: the defects the held-out what-if check exposed, each pinned."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from typing import Any

from tierctl.sim.config import EngineConfig
from tierctl.sim.uncertainty import what_if
from tierctl.sim.workload import hammer

from .helpers import FLAT

JITTERY = dataclasses.replace(FLAT, name="jittery", step_jitter=0.2, round_overhead_s=1e-3)
WL = hammer(random.Random(0), rate_per_s=6.0, duration_s=5.0, input_tokens=(64, 512),
            output_tokens=(8, 64))  # fmt: skip


def _vllm(*flags: str) -> EngineConfig:
    return EngineConfig.from_argv(["vllm", "serve", "m", *flags], engine="vllm")


def test_a_dtype_change_alone_is_not_modelled_never_no_measurable_effect() -> None:
    # --dtype float32 against bfloat16 printed 1.00 "no measurable effect" on every figure.
    wi = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "float32"), WL, JITTERY, draws=6)
    assert wi.rows
    for r in wi.rows:
        assert r.verdict == "not modelled: --dtype", r
        assert r.left_out == ("dtype",)
    # The same arms without the difference: judged as before.
    same = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "bfloat16"), WL, JITTERY,
                   draws=6)  # fmt: skip
    assert all(not r.verdict.startswith("not modelled") and not r.left_out for r in same.rows)


def test_a_dtype_change_beside_a_modelled_one_keeps_its_verdict_and_names_what_it_leaves_out() -> (
    None
):
    wi = what_if(_vllm("--dtype", "bfloat16"), _vllm("--dtype", "float32", "--max-num-seqs", "1"),
                 WL, JITTERY, draws=6)  # fmt: skip
    ttft = next(r for r in wi.rows if r.metric == "TTFT p50")
    assert ttft.verdict == "worse (leaves out --dtype)"


def test_the_cli_json_carries_the_not_modelled_verdict(run_cli: Callable[..., Any]) -> None:
    res = run_cli("sim", "compare", "--engine", "vllm", "--control", "vllm serve m --dtype bfloat16",
                  "--candidate", "vllm serve m --dtype float32", "--workload", "burst",
                  "--count", "2", "--input-tokens", "300", "--output-tokens", "4", "--json")  # fmt: skip
    assert res.code == 0, res.err
    table = json.loads(res.out)["table"]
    assert {r["verdict"] for r in table} == {"not modelled: --dtype"}
    assert all(r["left_out"] == ["dtype"] for r in table)
