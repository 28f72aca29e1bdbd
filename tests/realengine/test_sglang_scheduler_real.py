"""The simulator's SGLang scheduler against the real SGLang 0.5.23 scheduler, step by step.

``benchmarks/sglang_scheduler_steps.py`` (the full sweep, pdi 0/1/2/8 with and without the
overlap scheduler) in CI size: 8 requests in one batch, ``--chunked-prefill-size 256``,
``--max-running-requests 4``; the real steps are the scheduler's own ``Prefill batch`` /
``Decode batch`` lines (``--decode-log-interval 1``). One engine at a time.

- Without the overlap scheduler, at ``--prefill-decode-interval 1``, every step is the
  model's: the same prefills (sequences and tokens, chunks included), the same decode batch
  sizes, in the same order.
- With it (SGLang's default), the same: the model has the overlap scheduler's late free
  (``SimRules.overlap_frees_late``): a slot freed by a request finishing in decode round t is
  admitted from round t+2 (round t+1 decodes the other running requests). Before the rule, the
  model admitted at t+1 and 10 of 53 rounds differed at interval 0.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "sglang_scheduler_steps.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_scheduler_steps", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _flags(pdi: int, *extra: str) -> list[str]:
    return [
        "--chunked-prefill-size", "256",
        "--max-running-requests", "4",
        "--prefill-decode-interval", str(pdi),
        "--decode-log-interval", "1",
        *extra,
    ]  # fmt: skip


def test_without_overlap_every_step_is_the_models(sglang_python: Path, tmp_path: Path) -> None:
    bench = _bench()
    load = bench.workload(8, 7, 40, 600, 4, 24)
    flags = _flags(1, "--disable-overlap-schedule")
    real = bench.real_steps(flags, load, tmp_path, "pdi1")
    sim = bench.sim_steps([*flags, "--max-total-tokens", "65536"], load)
    assert sum(1 for s in real if s[0] == "P") == 14  # chunks and the running cap at work
    assert real == sim


def test_with_overlap_every_step_is_the_models_too(sglang_python: Path, tmp_path: Path) -> None:
    bench = _bench()
    load = bench.workload(8, 7, 40, 600, 4, 24)
    flags = _flags(0)
    real = bench.real_steps(flags, load, tmp_path, "pdi0")
    sim = bench.sim_steps([*flags, "--max-total-tokens", "65536"], load)
    late = [
        i for i in range(1, len(real) - 1)
        if real[i][0] == "D" and real[i - 1][0] == "D" and real[i][1] < real[i - 1][1]
        and real[i + 1][0] == "P"
    ]  # fmt: skip
    assert late, "the workload has rounds where a freed slot waits a round under overlap"
    assert real == sim
