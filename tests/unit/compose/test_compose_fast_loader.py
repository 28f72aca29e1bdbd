"""The compose reader's fast YAML loader builds exactly what PyYAML's loader builds.

:class:`tierctl.compose.tags.FastComposeYamlLoader` memoises plain scalars' tags and
immutable scalars' values and builds mappings and sequences in one walk; the law is that
every document reads to the same value (types included) or fails the same way as with
:class:`~tierctl.compose.tags.ComposeYamlLoader`.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierctl.compose.tags import ComposeYamlLoader, FastComposeYamlLoader

_SCALARS = st.sampled_from(
    [
        "plain", "'quoted'", '"dq"', "8000", "0o17", "017", "0x1F", "-3", "+4", "1_000",
        "1.5", ".inf", "-.Inf", ".nan", "1e3", "true", "False", "yes", "no", "on", "null",
        "~", "", "2001-12-14", "22:22", "!!str 5", "!!int '7'", "!!float 1", "!!bool true",
        "!reset", "!reset []", "!override [1]", "!override {a: 1}", "!override x", "=",
        "!!null ''", "'8080:80'", "[1, '2', x]", "{}", "[]",
    ]
)  # fmt: skip


def _typed(value: Any) -> Any:
    """The value with each scalar's type beside it (1 == True == 1.0 in Python)."""
    if isinstance(value, dict):
        return {repr(_typed(k)): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, float) and value != value:
        return ("nan", float)
    return (repr(value), type(value))


def _read(loader: type[Any], text: str) -> Any:
    parser = loader(text)
    try:
        node = parser.get_single_node()
        return ("ok", _typed(parser.construct_document(node)) if node is not None else None)
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__, str(exc))


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A compose-like document: nested keys, scalars of every kind, anchors, merge keys."""
    lines = ["x-base: &base", f"  k1: {draw(_SCALARS)}", f"  k2: {draw(_SCALARS)}"]
    lines += ["x-list: &items", f"  - {draw(_SCALARS)}", f"  - {draw(_SCALARS)}", "services:"]
    for i in range(draw(st.integers(1, 3))):
        lines.append(f"  s{i}:")
        if draw(st.booleans()):
            lines.append("    <<: *base" if draw(st.booleans()) else "    <<: [*base, {k3: 1}]")
        for key in draw(st.lists(st.sampled_from(["a", "b", "k1", "8", "true"]), unique=True)):
            lines.append(f"    {key}: {draw(_SCALARS)}")
        if draw(st.booleans()):
            lines.append("    seq: *items")
        if draw(st.booleans()):
            lines += ["    nested:", f"      - {{x: {draw(_SCALARS)}}}", "      - *base"]
    return "\n".join(lines) + "\n"


# No deadline: a draw is a YAML parse twice, slow only when the machine is (shared CI).
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_fast_loader_reads_every_document_as_pyyaml_does(text: str) -> None:
    assert _read(FastComposeYamlLoader, text) == _read(ComposeYamlLoader, text)


def test_fast_loader_refuses_what_pyyaml_refuses() -> None:
    """An unhashable key, a merge of a scalar, an unknown tag: the same error both ways."""
    for text in (
        "? [1, 2]\n: v\n",
        "a: &x 1\nb:\n  <<: *x\n",
        "a: !unknown 1\n",
        "a: !!binary x\n",
    ):
        theirs, mine = _read(ComposeYamlLoader, text), _read(FastComposeYamlLoader, text)
        assert theirs[0] == "error"
        assert mine == theirs


def test_aliases_share_one_value_as_in_pyyaml() -> None:
    """An alias reads to the same object as its anchor (PyYAML's behaviour, kept)."""
    parser = FastComposeYamlLoader("a: &x {k: [1]}\nb: *x\n")
    data = parser.construct_document(parser.get_single_node())
    assert data["a"] is data["b"]
