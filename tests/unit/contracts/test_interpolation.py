"""Compose interpolation: every form, validated without variables, resolved with them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.contracts.interpolation import InterpolationError, interpolate, parse, references

FORMS = [
    "${VAR}",
    "$VAR",
    "${VAR:-d}",
    "${VAR-d}",
    "${VAR:?need VAR}",
    "${VAR?need VAR}",
    "${VAR:+alt}",
    "${VAR+alt}",
    "${VAR:-${OTHER:-x}}",
]


@pytest.mark.parametrize("ref", FORMS)
def test_without_env_references_are_kept_as_written(ref: str) -> None:
    assert interpolate(f"a {ref} b") == f"a {ref} b"


def test_double_dollar_is_a_literal_dollar() -> None:
    assert interpolate("cost $$5 and $${HOME}") == "cost $5 and ${HOME}"
    assert references("$${HOME}") == []


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("${VAR:-d}", {}, "d"),
        ("${VAR:-d}", {"VAR": ""}, "d"),
        ("${VAR-d}", {"VAR": ""}, ""),
        ("${VAR:+alt}", {"VAR": "x"}, "alt"),
        ("${VAR:+alt}", {"VAR": ""}, ""),
        ("${VAR+alt}", {"VAR": ""}, "alt"),
        ("${VAR:-${OTHER:-x}}", {"OTHER": "o"}, "o"),
        ("$VAR/bin", {"VAR": "/usr"}, "/usr/bin"),
        ("${VAR}", {}, ""),
    ],
)
def test_with_env_values_are_substituted(text: str, env: dict[str, str], want: str) -> None:
    assert interpolate(text, env) == want


def test_required_variable_fails_only_with_an_environment() -> None:
    assert interpolate("${TOKEN:?set TOKEN}") == "${TOKEN:?set TOKEN}"
    with pytest.raises(InterpolationError, match="set TOKEN"):
        interpolate("${TOKEN:?set TOKEN}", {})
    with pytest.raises(InterpolationError):
        interpolate("${TOKEN:?set TOKEN}", {"TOKEN": ""})
    assert interpolate("${TOKEN?set TOKEN}", {"TOKEN": ""}) == ""


@pytest.mark.parametrize("bad", ["${", "${}", "${1A}", "a $ b", "${VAR", "${VAR!x}", "${A:-${B}"])
def test_malformed_references_are_errors(bad: str) -> None:
    with pytest.raises(InterpolationError):
        parse(bad)


def test_reference_records_operator_and_message() -> None:
    [ref] = references("x ${HF_TOKEN:?set HF_TOKEN for gated files} y")
    assert (ref.name, ref.operator, ref.argument, ref.required) == (
        "HF_TOKEN",
        ":?",
        "set HF_TOKEN for gated files",
        True,
    )


@given(st.text(alphabet=st.characters(blacklist_characters="$"), max_size=40))
def test_text_without_dollar_is_unchanged(text: str) -> None:
    assert interpolate(text) == text
    assert interpolate(text, {}) == text


@given(st.text(alphabet="ab $", max_size=20))
def test_escaping_every_dollar_round_trips(text: str) -> None:
    assert interpolate(text.replace("$", "$$")) == text
