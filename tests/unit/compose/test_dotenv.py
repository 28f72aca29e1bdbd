"""The dotenv reader (``tierctl.compose.dotenv``) on the shapes issue #38 found, with the
values the real Compose v2.40.3 reads (each checked against the binary by
``tests/compose_oracle/test_project_inputs_vs_compose.py``)."""

from __future__ import annotations

import pytest

from tierctl.compose.dotenv import DotenvError, read_dotenv

LOOKUP = {"SET": "value"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A='a\\'b'\n", {"A": "a'b"}),
        ('A="\\$X"\n', {"A": "$X"}),  # a literal $ (Compose prints it $$X)
        ("KEY\n", {"KEY": None}),  # bare, nothing has it: left out by the caller
        ("SET\n", {"SET": "value"}),
        ("A=1\nA\n", {"A": "1"}),  # a bare key keeps what the file gave it
        ("export =x\n", {"": "x"}),
        ("KEY", {"": "KEY"}),  # a name at the very end, no line end: the empty key's value
        ('A="x" junk\nB=1\n', {"A": "x", "junk": None, "B": "1"}),
        ("A: 1\n", {"A": "1"}),
        ("A=1 #c\nB=2#c\n", {"A": "1", "B": "2#c"}),
        ('A="\\0101\\012\\0\\q"\n', {"A": "A\\12\\\\q"}),
        ("A='multi\nline'\nB=2\n", {"A": "multi\nline", "B": "2"}),
        ("A=\ufeff1\n", {"A": "\ufeff1"}),
        ('A=${SET}\nB="${A}-${UNSET:-d}"\n', {"A": "value", "B": "value-d"}),
    ],
)
def test_values_as_compose_reads_them(text: str, expected: dict[str, str | None]) -> None:
    assert read_dotenv(text, "e.env", LOOKUP) == expected


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('A=1\nB="x\n', 2, "unterminated quoted value"),
        ("A='x\n", 1, "unterminated quoted value"),
        ("A=1\n\ufeffB=2\n", 2, "unexpected character"),
        ("A B=1\n", 1, "key cannot contain a space"),
        ("A=${UNSET:?need it}\n", 1, "need it"),
    ],
)
def test_refusals_are_located(text: str, line: int, words: str) -> None:
    with pytest.raises(DotenvError) as caught:
        read_dotenv(text, "e.env", LOOKUP)
    assert caught.value.line == line
    assert words in str(caught.value)
