"""Compose interpolation: every form, kept as written, resolved with defaults, or strictly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.compose.interpolation import (
    Interpolation,
    InterpolationError,
    interpolate,
    parse,
    references,
)

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
RESOLVING = [Interpolation.DEFAULTS, Interpolation.STRICT]


@pytest.mark.parametrize("ref", FORMS)
def test_without_env_references_are_kept_as_written(ref: str) -> None:
    assert interpolate(f"a {ref} b") == f"a {ref} b"
    assert interpolate(f"a {ref} b", {"VAR": "v"}, Interpolation.KEEP) == f"a {ref} b"


def test_double_dollar_is_a_literal_dollar() -> None:
    assert interpolate("cost $$5 and $${HOME}") == "cost $5 and ${HOME}"
    assert references("$${HOME}") == []


@pytest.mark.parametrize("mode", RESOLVING)
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
        ("${PORT:-30000}", {}, "30000"),
        ("${PORT:-30000}", {"PORT": ""}, "30000"),
        ("${PORT-30000}", {"PORT": ""}, ""),
        ("${PORT:-30000}", {"PORT": "8"}, "8"),
        ("$$PORT", {"PORT": "8"}, "$PORT"),
        ("$${PORT:-1}", {}, "${PORT:-1}"),
        ("a-$NAME-b", {"NAME": "x"}, "a-x-b"),
        ("${A:-${B:-deep}}", {}, "deep"),
        ("${A:+alt}", {"A": "1"}, "alt"),
        ("${A:+alt}", {}, ""),
        ("${UNSET}", {}, ""),
    ],
)
def test_with_env_values_are_substituted(
    text: str, env: dict[str, str], want: str, mode: Interpolation
) -> None:
    # Defaults and strict mode agree wherever no required variable is unset.
    assert interpolate(text, env, mode) == want


def test_required_variable_fails_only_with_an_environment() -> None:
    assert interpolate("${TOKEN:?set TOKEN}") == "${TOKEN:?set TOKEN}"
    with pytest.raises(InterpolationError, match="set TOKEN"):
        interpolate("${TOKEN:?set TOKEN}", {})
    with pytest.raises(InterpolationError):
        interpolate("${TOKEN:?set TOKEN}", {"TOKEN": ""})
    with pytest.raises(InterpolationError, match="set TOKEN"):
        interpolate("${TOKEN:?set TOKEN}", None, Interpolation.STRICT)
    assert interpolate("${TOKEN?set TOKEN}", {"TOKEN": ""}) == ""


@pytest.mark.parametrize("env", [None, {}, {"HF_TOKEN": ""}])
def test_defaults_mode_keeps_an_unset_required_secret_as_written(
    env: dict[str, str] | None,
) -> None:
    text = "${HF_TOKEN:?set HF_TOKEN for gated model files}"
    assert interpolate(text, env, Interpolation.DEFAULTS) == text
    assert interpolate(f"--token={text} --port ${{PORT:-30000}}", env, Interpolation.DEFAULTS) == (
        f"--token={text} --port 30000"
    )


def test_defaults_mode_keeps_a_required_secret_nested_in_a_default() -> None:
    text = "${A:-${HF_TOKEN:?set it}}"
    assert interpolate(text, {}, Interpolation.DEFAULTS) == "${HF_TOKEN:?set it}"
    with pytest.raises(InterpolationError, match="set it"):
        interpolate(text, {}, Interpolation.STRICT)


@pytest.mark.parametrize("mode", RESOLVING)
def test_required_secret_is_substituted_when_given(mode: Interpolation) -> None:
    assert interpolate("${HF_TOKEN:?set it}", {"HF_TOKEN": "hf_x"}, mode) == "hf_x"


# A malformed braced reference: docker compose refuses it ("invalid interpolation format"), in
# every mode, so the planner does too. (A `$` not followed by a name or `{` is a literal: see
# test_compose_template_table.py.)
MALFORMED = [
    "${",
    "${}",
    "${1A}",
    "${VAR",
    "${VAR!x}",
    "${A:-${B}",
    "${PORT",
    "${:-x}",
]


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_references_are_errors(bad: str) -> None:
    with pytest.raises(InterpolationError):
        parse(bad)
    for mode in Interpolation:
        with pytest.raises(InterpolationError):
            interpolate(bad, {}, mode)


@pytest.mark.parametrize("text", ["${PORT", "${:-x}", "${A:-${B}"])
def test_malformed_expression_message_quotes_the_brace(text: str) -> None:
    with pytest.raises(InterpolationError, match=r"\$\{"):
        interpolate(text, {}, Interpolation.DEFAULTS)


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
    for mode in Interpolation:
        assert interpolate(text, {}, mode) == text


@given(st.text(alphabet="ab $", max_size=20))
def test_escaping_every_dollar_round_trips(text: str) -> None:
    for mode in Interpolation:
        escaped = text.replace("$", "$$")
        # AS_WRITTEN is the text compose would read, so the escapes stay.
        want = escaped if mode is Interpolation.AS_WRITTEN else text
        assert interpolate(escaped, {"a": "x"}, mode) == want


@given(st.text(alphabet="ab ${}:-?+", max_size=24))
def test_as_written_changes_nothing_it_accepts(text: str) -> None:
    try:
        parse(text)
    except InterpolationError:
        return
    assert interpolate(text, {"a": "x"}, Interpolation.AS_WRITTEN) == text
