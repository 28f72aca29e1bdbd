"""Hand-edited files can hold anything: validation reports, it never crashes."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import GLM_SPEC
from tierctl.contracts import load_compose, validate
from tierctl.errors import TierctlError
from tierctl.render import render_compose
from tierctl.spec import load_spec

SPEC = load_spec(GLM_SPEC)
GOOD: dict[str, Any] = yaml.safe_load(render_compose(SPEC, spec_path=GLM_SPEC))

junk = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.text(max_size=8),
    st.lists(st.one_of(st.integers(0, 3), st.text(max_size=4)), max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=4), st.integers(0, 3), max_size=2),
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*path, i))
    return out


PATHS = _paths(GOOD)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _with_scrape(doc: dict[str, Any], content: Any) -> None:
    doc["configs"]["otelcol-scrape"]["content"] = content


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), junk)
def test_any_value_replaced_by_junk_is_reported_not_crashed(
    path: tuple[Any, ...], value: Any
) -> None:
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    _set(doc, path, value)
    try:
        code = validate(SPEC, [load_compose(yaml.safe_dump(doc), source="c.yaml")]).exit_code
    except TierctlError as exc:
        code = exc.exit_code
    assert code in (0, 1, 2)


@settings(max_examples=40, deadline=None)
# A `$` in junk text is malformed interpolation (bad input, exit 2: tested in tests/unit/compose),
# not a scrape-config question, so this test leaves it out.
@given(
    st.one_of(
        junk.filter(lambda c: "$" not in repr(c)),
        st.just("scrape_configs: {a: 1}\n"),
        st.just("receivers: [1, 2]\n"),
    )
)
def test_odd_scrape_config_content_is_a_violation(content: Any) -> None:
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    _with_scrape(doc, content)
    report = validate(SPEC, [load_compose(yaml.safe_dump(doc), source="c.yaml")])
    assert "TC002" in {v.rule for v in report.violations} or "TC007" in {
        v.rule for v in report.violations
    }


def test_bare_env_key_and_scalar_device_ids_are_reported() -> None:
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    r1, r2 = "model-sg-glm53-w4afp8-tp4-r1", "model-sg-glm53-w4afp8-tp4-r2"
    doc["services"][r2]["environment"]["HF_TOKEN"] = None
    doc["services"][r1]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] = True
    report = validate(SPEC, [load_compose(yaml.safe_dump(doc), source="c.yaml")])
    messages = [v.message for v in report.violations]
    assert any(
        "environment HF_TOKEN: spec gives" in m and "unset (a bare key)" in m for m in messages
    )
    assert "GPUs: the spec gives 0,1,2,3, found none" in messages
