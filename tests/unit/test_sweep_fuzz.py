"""The sweep generator (tests/sweep_fuzz.py) and the harness's hang rule.

The generator: its walk covers every (slot, value) pair of a kind once per product, a seed
rebuilds an input, every extra kind has seeds the commands accept, the secret check catches
every encoding, and a seeded batch per kind obeys the law. The harness: a run that sleeps
past its wall budget is a hang; one that only waited for a CPU is not.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from tests import fuzzing
from tests.fuzzing import Seeds, check_law, load_seeds, run_input
from tests.sweep_fuzz import (
    EXTRA_KINDS,
    SWEEP_KINDS,
    SWEEP_SECRET,
    SecretLeak,
    _no_leak,
    _pick,
    add_seeds,
    coverage,
    input_at,
)

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seeds, Path]:
    work = tmp_path_factory.mktemp("sweep")
    return add_seeds(load_seeds(work), work), work


@pytest.mark.parametrize(("slots", "values"), [(1, 1), (7, 3), (97, 45), (1000, 77)])
def test_the_walk_visits_every_pair_once_per_product(slots: int, values: int) -> None:
    pairs = {_pick(None, slots, values, m, seed=5) for m in range(slots * values)}  # type: ignore[arg-type]
    assert len(pairs) == slots * values


def test_every_kind_has_slots_and_a_seed(corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    sizes = coverage(seeds)
    assert set(sizes) == set(SWEEP_KINDS)
    assert all(n > 0 for n in sizes.values()), sizes


def test_a_seed_and_an_index_rebuild_the_input(corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    for n in range(0, 60, 7):
        assert input_at(seeds, 99, n) == input_at(seeds, 99, n)
    assert input_at(seeds, 99, 3) != input_at(seeds, 100, 3)


@pytest.mark.parametrize("kind", [k for k in EXTRA_KINDS if k != "cli"])
def test_the_extra_seeds_are_accepted_as_they_are(kind: str, corpus: tuple[Seeds, Path]) -> None:
    seeds, work = corpus
    for o in run_input(kind, 0, seeds.by_kind[kind][0], seeds, work, timeout_s=TIMEOUT_S):
        assert o.ok, (kind, o.command, o.stderr[-500:])
        assert o.code == 0, (kind, o.command, o.stderr[-500:])


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: s.replace("-", "%2D").replace("0x", "0%78"),
        lambda s: base64.b64encode(s.encode()).decode(),
        lambda s: s.encode().hex(),
    ],
)
def test_the_secret_check_sees_every_encoding(encode: object) -> None:
    from urllib.parse import quote

    forms = {
        SWEEP_SECRET,
        quote(SWEEP_SECRET, safe=""),
        base64.b64encode(SWEEP_SECRET.encode()).decode(),
        SWEEP_SECRET.encode().hex(),
    }
    printed = encode(SWEEP_SECRET)  # type: ignore[operator]
    leak = _no_leak(lambda: (0, f"url: {printed}", ""))
    if printed in forms:
        with pytest.raises(SecretLeak):
            leak()
    else:  # a hand-made percent-encoding quote() does not produce: not claimed
        leak()


@pytest.mark.parametrize("kind", SWEEP_KINDS)
def test_seeded_sweep_inputs_obey_the_law(kind: str, corpus: tuple[Seeds, Path]) -> None:
    seeds, work = corpus
    kinds = [k for k in SWEEP_KINDS if seeds.by_kind.get(k)]
    i = kinds.index(kind)
    for m in range(2):
        got, which, data, form = input_at(seeds, 2207, i + m * len(kinds))
        assert got == kind
        check_law(kind, which, data, seeds, work, timeout_s=TIMEOUT_S, form=form)


def _sleeper(seconds: float) -> list[tuple[str, object]]:
    return [("sleep", lambda: (time.sleep(seconds), (0, "", ""))[1])]


def test_a_run_asleep_past_its_wall_budget_is_a_hang(
    corpus: tuple[Seeds, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds, work = corpus
    monkeypatch.setattr(fuzzing, "commands_for", lambda *a, **k: _sleeper(2.0))
    [outcome] = run_input("spec", 0, b"x: 1\n", seeds, work, timeout_s=0.1)
    assert outcome.hang


def test_a_run_that_only_waited_for_a_cpu_is_not_a_hang(
    corpus: tuple[Seeds, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every elapsed second is reported as run-queue wait (as on a machine whose other
    processes held the CPU): the alarm re-arms instead of calling it a hang, up to the cap."""
    seeds, work = corpus
    monkeypatch.setattr(fuzzing, "commands_for", lambda *a, **k: _sleeper(1.0))
    monkeypatch.setattr(fuzzing, "runqueue_wait_s", lambda pid="self": time.monotonic())
    [outcome] = run_input("spec", 0, b"x: 1\n", seeds, work, timeout_s=0.1)
    assert not outcome.hang
    assert outcome.code == 0
    assert outcome.starved_s > 0.5
    # Past STARVED_CAP times the wall budget it is a hang however starved.
    monkeypatch.setattr(fuzzing, "commands_for", lambda *a, **k: _sleeper(5.0))
    [outcome] = run_input("spec", 0, b"x: 1\n", seeds, work, timeout_s=0.1)
    assert outcome.hang


def test_the_run_queue_wait_is_read_from_proc() -> None:
    assert fuzzing.runqueue_wait_s() >= 0.0
    assert fuzzing.runqueue_wait_s(2**22 + 12345) == 0.0  # no such process: 0, not an error
