"""Fuzzing with a fixed budget: any bytes, any mutation of a bundled example, through the
commands that read them, end in exit 0, 1 or 2 with a message, never a traceback or a hang.

The budget is small so that CI on two cores stays fast (a few hundred runs); the long run
with figures is ``benchmarks/fuzz.py``. Inputs are seeded: a failure names its seed and kind,
and ``tests.fuzzing.mutate`` rebuilds the input.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import KINDS, Seeds, check_law, inputs, load_seeds, mutate, run_input

# Generous: a run is ~0.05-0.5 s; the alarm only catches a real hang on a loaded machine.
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seeds, Path]:
    work = tmp_path_factory.mktemp("fuzz")
    return load_seeds(work), work


def _check(kind: str, which: int, data: bytes, corpus: tuple[Seeds, Path]) -> None:
    check_law(kind, which, data, *corpus, timeout_s=TIMEOUT_S)


def test_every_seed_is_accepted_as_is(corpus: tuple[Seeds, Path]) -> None:
    """The corpus itself reads cleanly (else the mutations test nothing)."""
    seeds, work = corpus
    for kind in KINDS:
        assert seeds.by_kind[kind], kind
        for which, data in enumerate(seeds.by_kind[kind]):
            for outcome in run_input(kind, which, data, seeds, work, timeout_s=TIMEOUT_S):
                assert outcome.ok, (kind, outcome)
                if outcome.command in ("render", "show", "read_trace", "load_workload"):
                    assert outcome.code == 0, (kind, outcome.command, outcome.stderr)


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("plan",)])
def test_seeded_mutations(kind: str, corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    seeds = Seeds(
        by_kind={kind: seeds.by_kind[kind]},
        compose_specs=seeds.compose_specs,
        compose_olds=seeds.compose_olds,
    )
    for k, which, data in inputs(seeds, 12, seed=sum(map(ord, kind))):
        _check(k, which, data, corpus)


def test_seeded_plan_mutations(corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    rng = random.Random(14)
    for _ in range(12):
        _check("plan", 0, mutate(seeds.by_kind["plan"][0], "plan", rng), corpus)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["spec", "compose", "workload", "jsonl", "azure"]),
    data=st.binary(max_size=2048),
)
def test_any_bytes(kind: str, data: bytes, corpus: tuple[Seeds, Path]) -> None:
    _check(kind, 0, data, corpus)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=st.sampled_from(["spec", "compose", "workload"]), seed=st.integers(0, 2**32))
def test_hypothesis_driven_mutations(kind: str, seed: int, corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    rng = random.Random(seed)
    which = rng.randrange(len(seeds.by_kind[kind]))
    _check(kind, which, mutate(seeds.by_kind[kind][which], kind, rng), corpus)
