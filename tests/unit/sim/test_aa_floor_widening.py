"""A measured A/A floor wider than the simulated one widens the interval by the excess."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from tierctl.sim.config import EngineConfig
from tierctl.sim.uncertainty import what_if
from tierctl.sim.workload import hammer

from .helpers import FLAT

JITTERY = dataclasses.replace(FLAT, name="jittery", step_jitter=0.2, round_overhead_s=1e-3)
A = EngineConfig.from_argv(["vllm", "serve", "m", "--max-num-seqs", "8"])
B = EngineConfig.from_argv(["vllm", "serve", "m", "--max-num-seqs", "4"])
WL = hammer(random.Random(0), rate_per_s=6.0, duration_s=10.0, input_tokens=(64, 512),
            output_tokens=(8, 64))  # fmt: skip


def _rows(floor: Any) -> dict[str, Any]:
    wi = what_if(A, B, WL, JITTERY, draws=10, aa_floor=floor)
    return {r.metric: r for r in wi.rows}


def test_a_floor_below_the_simulated_one_leaves_the_interval() -> None:
    plain, low = _rows(0.0), _rows(0.001)
    checked = 0
    for metric, r in plain.items():
        if r.floor > 0.001:
            assert (low[metric].low, low[metric].high) == (r.low, r.high)
            checked += 1
        elif r.low is not None and r.high is not None:  # identical draws (completion 1.00)
            assert low[metric].high == pytest.approx(r.high * 1.001)
    assert checked >= 4


def test_a_wider_measured_floor_widens_that_figure_only_by_its_excess() -> None:
    plain = _rows(0.0)
    wide = _rows({"TTFT p50": 1.0})
    base = plain["TTFT p50"]
    widen = 2.0 / (1.0 + base.floor)  # the simulated floor is what the plain row reports
    assert wide["TTFT p50"].low == pytest.approx(base.low / widen)
    assert wide["TTFT p50"].high == pytest.approx(base.high * widen)
    assert wide["TTFT p50"].floor == pytest.approx(1.0)
    assert math.isclose(wide["TPOT p50"].high, plain["TPOT p50"].high)


def test_the_cli_reads_one_floor_or_one_per_figure(run_cli: Callable[..., Any]) -> None:
    args = ("sim", "compare", "--control", "vllm serve m", "--candidate",
            "vllm serve m --max-num-seqs 4", "--workload", "burst", "--count", "2",
            "--input-tokens", "500", "--output-tokens", "4", "--preset", "dense-8b-h100")  # fmt: skip
    assert run_cli(*args, "--aa-floor", "TTFT p50=0.3,TPOT p50=0.1").code == 0
    assert run_cli(*args, "--aa-floor", "0.2").code == 0
    bad = run_cli(*args, "--aa-floor", "TTFT p99=0.3")
    assert bad.code == 2
    assert "no figure of the table" in bad.err
    assert run_cli(*args, "--aa-floor", "x").code == 2


def test_a_measured_floor_of_33_5_is_taken_with_a_warning_and_the_bound_is_100(
    run_cli: Callable[..., Any],
) -> None:
    # Issue #40: a measured A/A floor of 33.5 (a starved client's TTFT) was refused ("0..10").
    args = ("sim", "compare", "--control", "vllm serve m", "--candidate",
            "vllm serve m --max-num-seqs 4", "--workload", "burst", "--count", "2",
            "--input-tokens", "500", "--output-tokens", "4", "--preset", "dense-8b-h100")  # fmt: skip
    wide = run_cli(*args, "--aa-floor", "TTFT p50=33.5", "--json")
    assert wide.code == 0, wide.err
    assert "identical arms differ by up to 34.5x" in wide.err
    assert run_cli(*args, "--aa-floor", "0.5").err.count("warning: the floor") == 0
    assert run_cli(*args, "--aa-floor", "100").code == 0
    for bad in ("100.5", "-0.1", "nan", "inf"):
        got = run_cli(*args, "--aa-floor", bad)
        assert got.code == 2, bad
        assert "0..100" in got.err
