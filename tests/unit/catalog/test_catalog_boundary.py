"""The catalog file is a boundary read strictly, without pydantic (issue #39's start-up).

- every shipped catalog reads back to the same bytes (``to_json``), and its JSON Schema
  (``Catalog.json_schema``, what the fuzzers walk) accepts it;
- an unknown key, a missing field or a value of the wrong type is a ``ValueError`` naming the
  field (``catalog --catalog FILE`` says "not a tierctl catalog" with it, exit 2);
- lists in a constructor become tuples, so a flag read from JSON equals the one an extractor
  built; ``replace`` keeps what the parser was told.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CliResult
from tierctl.catalog.store import data_dir, load_catalog, shipped
from tierctl.engine_catalog import Catalog, Flag

SHIPPED = sorted(data_dir().glob("*.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_catalog_reads_back_to_its_bytes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    catalog = Catalog.from_json(text)
    assert catalog.to_json() == text
    assert jsonschema_rs.validator_for(Catalog.json_schema()).is_valid(json.loads(text))


def _doc() -> dict[str, Any]:
    engine, version = shipped()[0]
    data: dict[str, Any] = json.loads(load_catalog(engine, version).to_json())
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(extra=1), "catalog: unknown key 'extra'"),
        (lambda d: d.pop("version"), "catalog: 'version' is required"),
        (lambda d: d.update(version=3), "catalog.version: a str, not 3"),
        (lambda d: d.update(engine="tgi"), "unknown engine 'tgi'"),
        (lambda d: d["source"].update(files="a"), "source.files: a list of strings"),
        (lambda d: d.update(flags=[]), "catalog.flags: an object"),
        (lambda d: next(iter(d["flags"].values())).update(type="enum"), ".type: one of bool"),
        (lambda d: next(iter(d["flags"].values())).update(nargs=True), ".nargs: a string or"),
        (lambda d: next(iter(d["flags"].values())).update(aliases=[1]), ".aliases: a list of"),
        (lambda d: next(iter(d["flags"].values())).pop("dest"), "'dest' is required"),
        (lambda d: next(iter(d["flags"].values())).update(color=1), "unknown key 'color'"),
    ],
)
def test_a_broken_catalog_names_its_field(
    change: Callable[[dict[str, Any]], object], message: str
) -> None:
    doc = _doc()
    change(doc)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        Catalog.from_data(doc)
    # The schema the fuzzers walk refuses the same document.
    assert not jsonschema_rs.validator_for(Catalog.json_schema()).is_valid(doc)


def test_a_broken_catalog_file_is_exit_2(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    doc = _doc()
    doc["flags"][next(iter(doc["flags"]))]["type"] = "enum"
    bad = tmp_path / "cat.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  a:\n    image: x:1\n", encoding="utf-8")
    result = run_cli("validate", "--no-compose-binary", "--engine", str(bad), str(compose))
    assert result.code == 2, result.out + result.err
    assert "not a tierctl catalog" in result.err
    assert ".type: one of bool" in result.err
    assert "Traceback" not in result.err


@given(
    aliases=st.lists(st.text(min_size=1, max_size=5), max_size=3),
    choices=st.none() | st.lists(st.integers() | st.text(max_size=3), max_size=3),
)
def test_lists_become_tuples_and_json_round_trips(
    aliases: list[str], choices: list[Any] | None
) -> None:
    built = Flag(name="--x", dest="x", type="str", aliases=aliases, choices=choices)  # type: ignore[arg-type]
    assert built.aliases == tuple(aliases)
    assert built.choices == (None if choices is None else tuple(choices))
    assert Flag.from_data(json.loads(json.dumps(built.to_data()))) == built


def test_replace_keeps_the_parsers_behaviour() -> None:
    engine, version = shipped()[0]
    catalog = copy.copy(load_catalog(engine, version)).with_parser(underscores=True)
    changed = catalog.replace(flags={})
    assert changed.flags == {}
    assert changed.parser_underscores
    assert catalog.replace().lookup(next(iter(catalog.flags))) is not None
