"""`tierctl schema` and `tierctl show`."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import yaml

from tests.conftest import GLM_SPEC, SMALL_SPEC, CliResult


def test_schema_accepts_the_examples_and_rejects_a_typo(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("schema")
    assert result.code == 0
    schema = json.loads(result.out)
    for spec in (GLM_SPEC, SMALL_SPEC):
        jsonschema.validate(yaml.safe_load(spec.read_text()), schema)
    bad = yaml.safe_load(GLM_SPEC.read_text())
    bad["replicas"]["r2"]["gpu"] = [8]
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert any("gpu" in e.message for e in errors)


def test_show_json_lists_differences(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("show", "--format", "json", str(GLM_SPEC))
    assert result.code == 0
    data = json.loads(result.out)
    diffs = {d["setting"]: d["values"] for d in data["differences"]}
    assert diffs["--prefill-decode-interval"] == ["1", "2"]
    assert "--enable-dynamic-batch-tokenizer" not in diffs  # both replicas carry it
    assert [r["variant"].endswith("pdi1-h200-tp4") for r in data["replicas"]] == [True, False]


def test_show_identical_replicas(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("show", str(SMALL_SPEC))
    assert result.code == 0
    assert "identical argv and env" in result.out
