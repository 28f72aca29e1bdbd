"""``tierctl.bounded_schema``: anyOf/oneOf whose work is bounded by the document.

The law: on any document, the bounded validator yields the same errors (path, keyword,
message) as jsonschema's own, in the same order; only the context kept under an
anyOf/oneOf is cut, and a value over FOUND_MAX_CHARS is named, not printed whole. And the
reproducer (seed 2026120612 input 40958, issue #22): a ``build:`` whose ``secrets`` was a
flow list of 200,000 ints made ``validate`` create 600,000 schema errors, 20 s, for one line.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CliResult
from tierctl.bounded_schema import MAX_CONTEXT, bounded
from tierctl.contracts import schema

RunCli = Callable[..., CliResult]

_SERVICE_KEYS = sorted(schema._schema()["definitions"]["service"]["properties"])

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70000), st.sampled_from(["", "x", "8000:8000", "1g"])
)


def _values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["x", "target", "source", "mode", "secrets", "context", "cpus"])
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=12,
    )


_services = st.dictionaries(st.sampled_from(_SERVICE_KEYS), _values(_scalars), max_size=4)


def _errors(validator: Any, data: Any) -> list[tuple[list[Any], str, str]]:
    return [
        (list(e.absolute_path), str(e.validator), e.message)
        for e in itertools.islice(validator.iter_errors(data), 200)
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(service=_services)
def test_bounded_yields_what_jsonschema_yields(service: dict[str, Any]) -> None:
    data = {"services": {"a": {"image": "x", **service}}}
    plain = jsonschema.Draft7Validator(schema._schema())
    assert _errors(schema._validator(), data) == _errors(plain, data)


@pytest.mark.parametrize("value", ["x", 5, {"context": "."}, {"context": 5}, [], None])
def test_one_of_says_which_alternatives_accept(value: object) -> None:
    """oneOf's three outcomes (none, exactly one, more than one accepts) as jsonschema says
    them, on a schema of its own."""
    s = {"oneOf": [{"type": "string"}, {"type": ["string", "integer"]}, {"type": "object"}]}
    got = [e.message for e in bounded(jsonschema.Draft7Validator)(s).iter_errors(value)]
    assert got == [e.message for e in jsonschema.Draft7Validator(s).iter_errors(value)]


def test_any_of_and_one_of_keep_at_most_max_context_errors_per_alternative() -> None:
    s = {"anyOf": [{"items": {"type": "string"}}, {"type": "object"}]}
    (error,) = bounded(jsonschema.Draft7Validator)(s).iter_errors([1] * 500)
    assert len(error.context) == MAX_CONTEXT + 1
    (error,) = bounded(jsonschema.Draft7Validator)({"oneOf": s["anyOf"]}).iter_errors([1] * 500)
    assert len(error.context) == MAX_CONTEXT + 1


def _counting_errors(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    created = [0]
    init = jsonschema.ValidationError.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        created[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(jsonschema.ValidationError, "__init__", counting)
    return created


def _long_build(tmp_path: Path) -> Path:
    path = tmp_path / "compose.yaml"
    items = ", ".join(["1"] * 5000)
    path.write_text(f"services:\n  a:\n    image: x\n    build:\n      secrets: [{items}]\n")
    return path


@pytest.mark.parametrize(
    "argv", [["compose", "config"], ["import", "--output", "{tmp}/spec.yaml"]], ids=str
)
def test_input_40958_through_the_other_readers(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """``compose config`` (schema as Compose applies it) and ``import`` (type errors first)
    refuse the same file, located, drawing as few errors."""
    path = _long_build(tmp_path)
    created = _counting_errors(monkeypatch)
    r = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in argv], str(path))
    assert r.code == 2, r.err
    assert created[0] < 10 * MAX_CONTEXT, created
    assert "compose.yaml:4" in r.err
    assert "services.a.build" in r.err
    assert max(len(x) for x in r.err.splitlines()) < 1000


def test_seed_2026120612_input_40958_a_long_list_under_a_one_of(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build: {secrets: [1, 1, ...]}``: build is a oneOf (string or mapping), and
    jsonschema's oneOf drew every error of the mapping alternative (three per item) before
    the first was printed. The test counts the errors created, not seconds."""
    path = _long_build(tmp_path)
    created = _counting_errors(monkeypatch)
    r = run_cli("validate", "--no-compose-binary", str(path))
    assert r.code == 1, r.err
    assert created[0] < 10 * MAX_CONTEXT, created
    (line,) = [x for x in r.out.splitlines() if "TC007 schema:" in x]
    assert "services.a.build: {'secrets': [1, 1, " in line
    assert "... (15,013 characters) is not valid under any of the given schemas" in line
    assert len(line) < 1000
