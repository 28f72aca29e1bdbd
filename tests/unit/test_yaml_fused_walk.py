"""The fused bounded walk reads every document exactly as the reference path does.

:func:`tierctl.readers.load_yaml` with a fast loader and no line map (the compose reader, the
collector's inline config) checks the node graph's bounds and builds the values in one walk
(:meth:`tierctl.yaml12.FastConstructor.build_bounded`). The reference is the same function
with PyYAML's own constructor (:class:`~tierctl.compose.tags.ComposeYamlLoader`), which
checks the whole graph first (``_check_graph``) and then builds. The law: the same value,
types included, or the same refusal (message, file, line, rule, fix), on generated documents
holding every kind of problem the walk decides (duplicate keys, recursive and fanned-out
aliases, nesting, refused and unknown tags, collection keys, bad merges), under small limits
as well as the defaults, and on every compose file of the repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.compose.test_compose_fast_loader import _typed
from tierctl.compose.tags import ComposeYamlLoader, FastComposeYamlLoader
from tierctl.errors import ComposeInputError
from tierctl.readers import Limits, load_yaml
from tierctl.yaml12 import FastYaml12Loader, Yaml12Loader

_ROOT = Path(__file__).resolve().parents[2]

_SCALARS = st.sampled_from(
    [
        "plain", "'quoted'", "8000", "0x1F", "-3", "1.5", ".nan", "true", "no", "null", "~",
        "", "2001-12-14", "22:22", "=", "x=", "!!str 5", "!!int '7'", "!!float 1", "!reset",
        "!reset []", "!override [1, {a: 2}]", "!override {a: 1}", "!override x", "[1, '2', x]",
        "{}", "[]", "{k: v, n: 1}", "!!binary aGk=", "!!set {a}", "!!timestamp 2001-12-14",
        "!unknown 1", "!bad {a: 1}", "!!value =", "!!float x", "!!int x", "*a", "*b",
        "[*a, *b, *a]", "{<<: *a, k: 1}", "{<<: [*a, *b]}", "{<<: *s}", "{? [1]: v}",
    ]
)  # fmt: skip


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A document with anchors &a (a mapping), &b (a list), &s (a scalar), then nested
    keys whose values are drawn from every kind of scalar, collection, tag and problem."""
    lines = ["x-a: &a", f"  k1: {draw(_SCALARS)}", "  k2: 1", "x-b: &b", "  - 1", "x-s: &s 7"]

    def block(indent: int, depth: int) -> None:
        names = st.sampled_from(["a", "b", "k1", "8", "<<", "c"])
        # Mostly unique keys; a repeated one is a duplicate (refused, except <<).
        keys = draw(st.lists(names, max_size=4, unique=draw(st.integers(0, 4)) > 0))
        for key in keys:
            pad = " " * indent
            if key == "<<":
                lines.append(f"{pad}<<: {draw(st.sampled_from(['*a', '[*a, *a]', '*s', '*b']))}")
            elif depth < 3 and draw(st.booleans()):
                anchor = draw(st.sampled_from(["", "", "", " &r"]))
                lines.append(f"{pad}{key}:{anchor}")
                if draw(st.booleans()):
                    block(indent + 2, depth + 1)
                    if anchor == " &r" and draw(st.booleans()):
                        lines.append(f"{pad}  self: *r")  # a recursive alias
                else:
                    for _ in range(draw(st.integers(1, 3))):
                        lines.append(f"{pad}  - {draw(_SCALARS)}")
            else:
                lines.append(f"{pad}{key}: {draw(_SCALARS)}")

    lines.append("services:")
    lines.append("  s:")
    block(4, 0)
    return "\n".join(lines) + "\n"


def _outcome(text: str, loader: type[Any], line_depth: int | None, limits: Limits) -> Any:
    try:
        doc = load_yaml(
            text,
            "f.yaml",
            error=ComposeInputError,
            loader=loader,
            line_depth=line_depth,
            limits=limits,
        )
    except ComposeInputError as exc:
        return ("refused", exc.message, exc.location, exc.rule, exc.fix)
    return ("read", _typed(doc.data))


_LIMITS = st.one_of(
    st.just(Limits()),
    st.builds(Limits, max_depth=st.integers(1, 8), max_nodes=st.integers(1, 80)),
)


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), _LIMITS)
def test_fused_walk_reads_as_the_reference_path(text: str, limits: Limits) -> None:
    fused = _outcome(text, FastComposeYamlLoader, 0, limits)
    assert fused == _outcome(text, ComposeYamlLoader, None, limits)
    assert fused == _outcome(text, FastComposeYamlLoader, None, limits)  # check, then build


def test_fused_walk_refuses_each_problem_at_the_reference_line() -> None:
    """Each problem alone, and two at once (which one is named is the reference's choice)."""
    cases = {
        "a: 1\nb: 2\na: 3\n": "already",  # not the wording: the caller's (duplicates=True)
        "a: &r\n  b: *r\n": "itself",
        "a: !!binary aGk=\n": "!!binary",
        "a:\n  b:\n    c: !bad 1\nd: !bad2 2\n": "!bad2",  # PyYAML builds d before a.b.c
        "a:\n  - !bad 1\n  - [!bad2 2]\n": "!bad'",
        "? [1, 2]\n: v\n": "invalid map key",
        "a: &x 1\nb:\n  <<: *x\n": "merging",
        "a: [[[[[[[[1]]]]]]]]\n": "deeper",
        "a: &x [1, 1, 1, 1]\nb: [*x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x]\n": "nodes",
    }
    limits = Limits(max_depth=6, max_nodes=40)
    for text, word in cases.items():
        fused = _outcome(text, FastComposeYamlLoader, 0, limits)
        assert fused[0] == "refused", text
        assert fused == _outcome(text, ComposeYamlLoader, None, limits), text
        if word != "already":
            assert word in fused[1], (text, fused)


def test_a_plain_equals_sign_is_a_string_as_compose_reads_it() -> None:
    """go-yaml reads a plain ``=`` as the string "=" (``docker compose config`` prints
    ``command: ["="]``); PyYAML's YAML 1.1 "value" type made it an unknown-tag refusal."""
    text = "a: =\nb: [=, x=]\n=: 1\n"
    for loader in (Yaml12Loader, FastYaml12Loader, ComposeYamlLoader, FastComposeYamlLoader):
        assert load_yaml(text, "f", loader=loader, line_depth=0).data == {
            "a": "=",
            "b": ["=", "x="],
            "=": 1,
        }


def _repository_yaml() -> list[Path]:
    found = [
        p
        for folder in ("examples", "tests", "benchmarks", "docs")
        for pattern in ("*.yaml", "*.yml")
        for p in sorted((_ROOT / folder).rglob(pattern))
    ]
    return found


def test_every_repository_yaml_file_reads_as_the_reference_path() -> None:
    files = _repository_yaml()
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        fused = _outcome(text, FastComposeYamlLoader, 0, Limits())
        assert fused == _outcome(text, ComposeYamlLoader, None, Limits()), path


@pytest.mark.parametrize("hosts", [3])
def test_the_fleet_reads_as_the_reference_path(hosts: int) -> None:
    """Rendered fleet files (the benchmark's), big and anchor-free, read the same both ways."""
    import sys

    sys.path.insert(0, str(_ROOT / "benchmarks"))
    from fleet import fleet_spec_texts

    from tierctl.render import render_compose
    from tierctl.spec import load_spec_text

    for name, spec_text in fleet_spec_texts(hosts, 8):
        text = render_compose(load_spec_text(spec_text, name))
        fused = _outcome(text, FastComposeYamlLoader, 0, Limits())
        assert fused[0] == "read"
        assert fused == _outcome(text, ComposeYamlLoader, None, Limits())
