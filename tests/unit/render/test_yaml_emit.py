"""The emitter's law: any document it writes reads back identically with both YAML readers."""

from __future__ import annotations

import io
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tierctl.render.yaml_emit import dump_yaml

scalars = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "yes",
            "No",
            "on",
            "OFF",
            "~",
            "null",
            "1:20",
            "0x1f",
            "0o17",
            "1e5",
            "2001-12-14",
            ".inf",
            "-.5",
            "--port",
            "-m",
            "- a",
            "a: b",
            "#x",
            "a #b",
            "line1\nline2\n",
            "line1\nline2",
            "  lead",
            "trail ",
            "",
            "'q'",
            '"q"',
            "${HF_TOKEN:?x}",
            "@at",
            "`tick`",
            "%pct",
            "!tag",
            "&anchor",
            "*alias",
        ]
    ),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
keys = st.one_of(st.text(min_size=1, max_size=12), st.sampled_from(["on", "yes", "1", "a:b"]))
docs = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=20,
)


def _ruamel_load(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, docs, max_size=5))
def test_round_trips_through_pyyaml_and_ruamel(doc: dict[str, Any]) -> None:
    text = dump_yaml(doc)
    assert yaml.safe_load(text) == (doc or None) or (doc == {} and yaml.safe_load(text) is None)
    if doc:
        assert _ruamel_load(text) == doc


def test_flags_and_ports_are_readable_and_safe() -> None:
    text = dump_yaml({"command": ["python3", "-m", "x", "--port", "30001"], "ports": ["22:22"]})
    assert "- --port\n" in text
    assert '- "30001"' in text  # a number-like string stays a string
    assert '- "22:22"' in text  # YAML 1.1 would read 22:22 as the integer 1342
    assert yaml.safe_load(text)["ports"] == ["22:22"]


def test_multiline_strings_are_literal_blocks() -> None:
    text = dump_yaml({"content": "a: 1\nb:\n  - 2\n"})
    assert text == "content: |\n  a: 1\n  b:\n    - 2\n"


def test_trailing_newline_is_never_plain() -> None:
    """`$` in a regex matches before a final newline; a plain `A` would lose it."""
    for doc in ({"k": ["A\n"]}, {"A\n": None}, {"k": {"A\n": 1}}):
        assert yaml.safe_load(dump_yaml(doc)) == doc
