"""Schema-driven fuzzing, CI-sized: inputs generated from tierctl's own schemas, made hostile,
through every command that reads them. The law: exit 0/1/2/3, a message, no traceback, no hang.

The generator is :mod:`tests.schema_fuzz`; the long run is ``benchmarks/fuzz.py --generator
schema``. The tests below also pin the generator itself: it reaches every field of every model
(so a new field is fuzzed the day it is added), and what it calls valid is valid.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import Seeds, check_law, load_seeds
from tests.schema_fuzz import (
    SCHEMA_KINDS,
    coverage,
    generate,
    hostile_documents,
    hostile_inputs,
    schema_for,
)

TIMEOUT_S = 120.0  # a hang, not a slow run on a loaded machine


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seeds, Path]:
    work = tmp_path_factory.mktemp("schema-fuzz")
    return load_seeds(work), work


def _check(kind: str, which: int, data: bytes, corpus: tuple[Seeds, Path]) -> None:
    check_law(kind, which, data, *corpus, timeout_s=TIMEOUT_S)


def _model_fields(model: Any, prefix: str) -> set[str]:
    """Dotted paths of a pydantic model's fields, into nested models, maps and lists."""
    from pydantic import BaseModel

    out: set[str] = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        out.add(path)
        ann = info.annotation
        for arg, sub in _nested_models(ann):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and path.count(".") < 4:
                out |= _model_fields(arg, f"{path}{sub}.")
    return out


def _nested_models(ann: Any, sub: str = "") -> list[tuple[Any, str]]:
    import typing

    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is None:
        return [(ann, sub)]
    if origin is dict:
        return _nested_models(args[1], sub + ".*")
    if origin in (list, tuple):
        return [m for a in args if a is not Ellipsis for m in _nested_models(a, sub + ".[]")]
    if origin is typing.Annotated:
        return _nested_models(args[0], sub)
    return [m for a in args for m in _nested_models(a, sub)]


@pytest.mark.parametrize(
    ("kind", "model_path"),
    [
        ("spec", "tierctl.spec.tier_spec:TierSpec"),
        ("workload", "tierctl.bench.workload:BenchWorkload"),
        ("plan", "tierctl.rollout.plan_schema:Plan"),
    ],
)
def test_every_model_field_is_a_fuzzed_path(kind: str, model_path: str) -> None:
    """A field added to a model is in its schema, so the generator reaches it."""
    import importlib

    module, name = model_path.split(":")
    model = getattr(importlib.import_module(module), name)
    reached = set(coverage(kind))
    missing = sorted(p for p in _model_fields(model, "") if p not in reached)
    assert missing == [], missing


def test_compose_paths_cover_the_service_keys() -> None:
    reached = set(coverage("compose"))
    for key in ("image", "command", "deploy.resources.reservations.devices", "logging.driver"):
        assert f"services.*.{key}" in reached, key


@pytest.mark.parametrize("kind", ["spec", "workload", "plan", "compose", "jsonl", "azure"])
def test_generated_documents_satisfy_their_schema(kind: str) -> None:
    """The valid half of the generator is valid (else it only ever tests the first check)."""
    schema = schema_for(kind)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if kind == "compose":
        cls = jsonschema.Draft7Validator
    validator = cls(schema)
    rng = random.Random(sum(map(ord, kind)))
    bad = []
    for _ in range(40):
        doc = generate(schema, schema, rng)
        errors = list(validator.iter_errors(doc))
        if errors:
            bad.append((doc, errors[0].message))
    assert len(bad) <= 2, bad[:3]  # a pattern or two the small regex generator misses


def test_the_stream_is_reproducible(corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    assert list(hostile_inputs(seeds, 16, 5)) == list(hostile_inputs(seeds, 16, 5))
    assert list(hostile_inputs(seeds, 16, 5)) != list(hostile_inputs(seeds, 16, 6))


@pytest.mark.slow
@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_schema_driven_inputs_through_every_command(kind: str, corpus: tuple[Seeds, Path]) -> None:
    """A fixed, seeded batch per kind (a failure names the input)."""
    seeds, _ = corpus
    only = Seeds(
        by_kind={kind: seeds.by_kind[kind]},
        compose_specs=seeds.compose_specs,
        compose_olds=seeds.compose_olds,
    )
    for k, which, data in hostile_inputs(only, 6, seed=22 + sum(map(ord, kind))):
        _check(k, which, data, corpus)


@pytest.mark.slow
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hypothesis_explores_schema_inputs(data: Any, corpus: tuple[Seeds, Path]) -> None:
    seeds, _ = corpus
    kind = data.draw(st.sampled_from(SCHEMA_KINDS))
    which, raw = data.draw(hostile_documents(seeds, kind))
    _check(kind, which, raw, corpus)
