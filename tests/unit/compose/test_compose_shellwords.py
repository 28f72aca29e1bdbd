"""String commands split as compose splits them: go-shellwords' own test table, as data."""

from __future__ import annotations

import pytest

from tierctl.compose import parse_compose
from tierctl.compose.forms import command_cut
from tierctl.compose.shellwords import ShellWordsError, split_shell_words
from tierctl.errors import ComposeInputError

# (line, tokens) from mattn/go-shellwords' TestSimple and friends, restated.
SIMPLE: list[tuple[str, list[str]]] = [
    ("", []),
    ('""', [""]),
    ("''", [""]),
    ("var --bar=baz", ["var", "--bar=baz"]),
    ('var --bar="baz"', ["var", "--bar=baz"]),
    ('var "--bar=baz"', ["var", "--bar=baz"]),
    ("var \"--bar='baz'\"", ["var", "--bar='baz'"]),
    ("var --bar=`baz`", ["var", "--bar=`baz`"]),
    ('var "--bar=\\"baz\'"', ["var", "--bar=\"baz'"]),
    ("var \"--bar=\\'baz\\'\"", ["var", "--bar='baz'"]),
    ("var --bar='\\'", ["var", "--bar=\\"]),
    ('var "--bar baz"', ["var", "--bar baz"]),
    ('var --"bar baz"', ["var", "--bar baz"]),
    ('var  --"bar baz"', ["var", "--bar baz"]),
    ('a "b"', ["a", "b"]),
    ('a " b "', ["a", " b "]),
    ('a "   "', ["a", "   "]),
    ("a 'b'", ["a", "b"]),
    ("a ' b '", ["a", " b "]),
    ("a '   '", ["a", "   "]),
    ("foo bar\\  ", ["foo", "bar "]),
    ("foo \"\" bar ''", ["foo", "", "bar", ""]),
    ("foo \\\\", ["foo", "\\"]),
    ("foo \\& bar", ["foo", "&", "bar"]),
    ("sh -c \"printf 'Hello\\tworld\\n'\"", ["sh", "-c", "printf 'Hello\tworld\n'"]),
    # $( ... ) is kept as literal text when command substitution is off (compose's setting)
    ('echo $(echo "foo")', ["echo", '$(echo "foo")']),
    ("echo bar=$(echo 200)cm", ["echo", "bar=$(echo 200)cm"]),
    ("bundle exec thin -p 3000", ["bundle", "exec", "thin", "-p", "3000"]),  # compose-go
]


@pytest.mark.parametrize(("line", "tokens"), SIMPLE)
def test_go_shellwords_table(line: str, tokens: list[str]) -> None:
    assert split_shell_words(line) == (tokens, -1)


# An unquoted ; & | < > ends the command: the rest is dropped (and reported by position).
CUT: list[tuple[str, list[str], str]] = [
    ("echo 🍺; seq 1 10", ["echo", "🍺"], "; seq 1 10"),
    ("ls -la 2>foo", ["ls", "-la"], "2>foo"),
    ("sh -c echo a && echo b", ["sh", "-c", "echo", "a"], "&& echo b"),
    (
        "python3 -m sglang.launch_server --port 30000 | tee log",
        ["python3", "-m", "sglang.launch_server", "--port", "30000"],
        "| tee log",
    ),
    ("cat < in", ["cat"], "< in"),
    ("echo x>out", ["echo", "x"], ">out"),
    ("sh -c 'a; b | c > d'", ["sh", "-c", "a; b | c > d"], ""),
]


@pytest.mark.parametrize(("line", "tokens", "dropped"), CUT)
def test_unquoted_operators_cut_the_command(line: str, tokens: list[str], dropped: str) -> None:
    got, pos = split_shell_words(line)
    assert got == tokens
    assert (line[pos:] if pos >= 0 else "") == dropped
    assert command_cut(line) == (dropped or None)


@pytest.mark.parametrize(
    "line", ["foo '", 'foo "', "foo `", "echo $(echo1", "echo (echo1", "echo )echo1", "a \\"]
)
def test_go_shellwords_errors(line: str) -> None:
    with pytest.raises(ShellWordsError):
        split_shell_words(line)


def test_compose_reads_a_string_command_with_shellwords() -> None:
    compose = parse_compose(
        'services:\n  a:\n    image: x\n    command: sh -c "echo a"; echo b\n',
        source="c.yaml",
    )
    assert compose.services["a"].command == ("sh", "-c", "echo a")


def test_a_bare_parenthesis_is_a_located_error() -> None:
    with pytest.raises(ComposeInputError, match="cannot split") as info:
        parse_compose("services:\n  a:\n    command: echo (x)\n", source="c.yaml")
    assert info.value.location is not None
    assert info.value.location.line == 3
