"""Compose interpolation as docker compose applies it, with secrets kept literal."""

from __future__ import annotations

import pytest

from tierctl.errors import ComposeInputError
from tierctl.rollout.interpolate import interpolate


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
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
        ("cost $5", {}, "cost $5"),
    ],
)
def test_interpolation_matches_compose(text: str, env: dict[str, str], want: str) -> None:
    assert interpolate(text, env) == want


def test_required_secret_stays_literal_when_unset() -> None:
    text = "${HF_TOKEN:?set HF_TOKEN for gated model files}"
    assert interpolate(text, {}) == text


def test_required_secret_is_substituted_when_given() -> None:
    assert interpolate("${HF_TOKEN:?set it}", {"HF_TOKEN": "hf_x"}) == "hf_x"


@pytest.mark.parametrize("text", ["${PORT", "${:-x}", "${A:-${B}"])
def test_malformed_expression_is_an_input_error(text: str) -> None:
    with pytest.raises(ComposeInputError, match=r"\$\{"):
        interpolate(text, {})
