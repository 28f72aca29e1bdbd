"""The long fuzz run's bookkeeping (benchmarks/fuzz.py): reproducers kept, CPU counted.

Session 7 lost the reproducers of seed 4411931's 10 hangs (run without ``--save``); the run
now keeps them by default, appends every failing command of an input, and says how to
re-run the file. Inputs per CPU second is the harness's own speed at any load.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_bench", ROOT / "benchmarks" / "fuzz.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_a_failing_input_is_kept_with_every_failing_command(
    fuzz: ModuleType, tmp_path: Path
) -> None:
    args = argparse.Namespace(seed=4411931, generator="all")
    fuzz._save(tmp_path, args, 6830, "kube", b"tier: x\n", "kube through render-kube: hang")
    fuzz._save(tmp_path, args, 6830, "kube", b"tier: x\n", "kube through validate-kube: hang")
    assert (tmp_path / "4411931-6830-kube.yaml").read_bytes() == b"tier: x\n"
    note = (tmp_path / "4411931-6830-kube.txt").read_text()
    assert "render-kube" in note
    assert "validate-kube" in note
    assert "--seed 4411931 --only 6830" in note
    assert f"--replay {tmp_path / '4411931-6830-kube.yaml'} --kind kube" in note


def test_reproducers_are_kept_by_default(fuzz: ModuleType) -> None:
    assert fuzz.DEFAULT_SAVE.name == "tierctl-fuzz-repro"


def test_cpu_seconds_survive_a_replaced_worker(fuzz: ModuleType) -> None:
    tally = fuzz.Tally()
    tally.cpu_s[0] = 5.0
    tally.cpu_done += tally.cpu_s.pop(0)  # the watchdog's replacement of worker 0
    tally.cpu_s[0] = 2.0
    tally.cpu_s[1] = 3.0
    assert tally.cpu == 10.0


def test_a_run_waiting_on_a_starved_child_is_not_counted_as_its_own_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run blocked on the Compose binary is off the CPU by its own doing only as far as the
    binary itself ran: the binary's wait for a CPU is taken off too (a false hang at load 10)."""
    import subprocess

    import tests.fuzzing as fuzzing

    child = subprocess.Popen(["sleep", "30"])
    try:
        waits = {str(child.pid): 5.0}
        real = fuzzing.runqueue_wait_s
        monkeypatch.setattr(
            fuzzing,
            "runqueue_wait_s",
            lambda pid="self": waits.get(str(pid), 0.0) if pid != "self" else real(),
        )
        # Other children of this process (the suite's own dockerd, servers) may be alive too:
        # only this one's figure is under test, the others read 0 through the stand-in.
        seen = fuzzing.children_runqueue_wait_s()
        assert seen[child.pid] == 5.0
        assert all(w == 0.0 for pid, w in seen.items() if pid != child.pid)
        budget = fuzzing._WallBudget(60.0)
        waits[str(child.pid)] = 47.0  # it waited 42 s for a CPU during the run
        budget.own_s()
        assert 42.0 <= budget.starved_s < 47.0
    finally:
        child.kill()
        child.wait()


def test_a_child_alive_before_the_run_counts_only_its_wait_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child the worker had before the run (a test's server, a dockerd) has waited for a CPU
    for all its life: that history is not the run's starvation (it hid a 2 s sleep's hang
    behind a dockerd's 31 s under the whole suite)."""
    import subprocess

    import tests.fuzzing as fuzzing

    child = subprocess.Popen(["sleep", "30"])
    try:
        real = fuzzing.runqueue_wait_s
        monkeypatch.setattr(
            fuzzing,
            "runqueue_wait_s",
            lambda pid="self": 1000.0 if str(pid) == str(child.pid) else real(),
        )
        budget = fuzzing._WallBudget(60.0)
        budget.own_s()
        assert budget.starved_s < 1.0
    finally:
        child.kill()
        child.wait()
