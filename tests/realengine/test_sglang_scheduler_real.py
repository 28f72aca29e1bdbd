"""The simulator's SGLang scheduler against the real SGLang 0.5.23 scheduler, step by step.

``benchmarks/sglang_scheduler_steps.py`` (the full sweep, pdi 0/1/2/8 with and without the
overlap scheduler) in CI size: 8 requests in one batch, ``--chunked-prefill-size 256``,
``--max-running-requests 4``; the real steps are the scheduler's own ``Prefill batch`` /
``Decode batch`` lines (``--decode-log-interval 1``). One engine at a time.

- Without the overlap scheduler, at ``--prefill-decode-interval 1``, every step is the
  model's: the same prefills (sequences and tokens, chunks included), the same decode batch
  sizes, in the same order.
- With it (SGLang's default), the model lacks one rule, pinned here until the model has it: a
  slot freed by a request finishing in decode round t is admitted from round t+2 (round t+1
  decodes the other running requests), where the model admits at t+1.
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


def test_with_overlap_the_model_admits_one_round_early(sglang_python: Path, tmp_path: Path) -> None:
    bench = _bench()
    load = bench.workload(8, 7, 40, 600, 4, 24)
    flags = _flags(0)
    real = bench.real_steps(flags, load, tmp_path, "pdi0")
    sim = bench.sim_steps([*flags, "--max-total-tokens", "65536"], load)
    first = next(i for i, (a, b) in enumerate(zip(real, sim, strict=False)) if a != b)
    assert real[:first] == sim[:first]
    assert first > 8  # the chunked prefills and the first decode rounds agree
    running = real[first - 1][1]
    assert real[first] == ("D", running - 1, 0)  # real: the others decode once more
    assert real[first + 1][0] == "P"  # then the freed slot is admitted
    assert sim[first][0] == "P"  # the model: admitted at once
