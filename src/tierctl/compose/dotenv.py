"""Dotenv files (``.env``, a service's ``env_file``) read as Compose v2 reads them.

Compose's reader (compose-go's ``dotenv`` package) is a scanner, not a line splitter, and
its rules are what the binary was probed for (``tests/compose_oracle/test_dotenv_oracle.py``):

- a statement starts at the first non-space character; ``#`` there starts a comment line;
- ``export`` followed by white space is dropped (``export =x`` is the empty key, read);
- a key is letters, digits, ``_ . - [ ]`` (spaces between them are refused: "key cannot
  contain a space"); any other character, a BOM included, is refused; it ends at ``=``,
  ``:`` (YAML style) or a line end (a bare ``KEY``: its value is looked up, and the key is
  left out when nothing has it);
- an unquoted value runs to the line end, cut at the first `` #`` and trimmed;
- a quoted value runs to its closing quote, over line ends, a backslash before the quote
  escaping it (``'a\\'b'`` is ``a'b``); an unterminated quote is refused; single quotes are
  literal, double quotes expand ``\\n \\r \\t \\a \\b \\f \\v \\\\ \\"``, ``\\0NNN`` (octal) and
  ``\\$`` (a literal ``$``), other backslashes staying as written; whatever follows the
  closing quote is read as the next statement;
- unquoted and double-quoted values are interpolated like the compose file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tierctl.compose.forms import FormError
from tierctl.compose.interpolation import Interpolation, InterpolationError, interpolate

#: Go's ``unicode.IsSpace`` below U+0100 (the parser's statement start and key trim).
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0")
#: The parser's own ``isSpace``: white space that is not a line end.
_INLINE_SPACE = frozenset("\t\v\f\r \x85\xa0")
#: What Go's ``strings.TrimRightFunc(s, unicode.IsSpace)`` trims (Unicode's White_Space).
_TRAILING_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_EXPORT = re.compile(r"export[\t\n\f\r ]+")
_ESCAPE = re.compile(r"\\(?:[abcfnrtv$\"\\]|0\d{0,3})")
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    '"': '"',
    "\\": "\\",
    "$": "$$",
}


def _go_space(char: str) -> bool:
    if char in _GO_SPACE:
        return True
    return ord(char) > 0xFF and char.isspace()


def _key_char(char: str) -> bool:
    return char in "_.-[]" or char.isalpha() or char.isnumeric()


def _unescape(match: re.Match[str]) -> str:
    text = match.group(0)
    if text[1] != "0":
        return _SIMPLE_ESCAPES.get(text[1], text)
    digits = text[2:]
    # `\0NNN` is Go's `\NNN`: exactly three octal digits, at most 255; anything else stays
    # as that rewriting left it (`\012` is `\12`, `\0` a lone backslash), as Compose has it.
    if len(digits) == 3 and all(d in "01234567" for d in digits) and int(digits, 8) <= 255:
        return chr(int(digits, 8))
    return "\\" + digits


class DotenvError(FormError):
    """A dotenv file Compose refuses, at ``line``."""

    def __init__(self, message: str, *, line: int, rule: str, fix: str) -> None:
        super().__init__(message, rule=rule, fix=fix)
        self.line = line


def _error(line: int, message: str, fix: str) -> DotenvError:
    return DotenvError(
        message,
        line=line,
        rule="an env file line is KEY=VALUE, the value unquoted or in matching quotes",
        fix=fix,
    )


class _Scanner:
    """One file's text and the position and line the scan has reached."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    @property
    def line(self) -> int:
        return self.text.count("\n", 0, self.pos) + 1

    def statement(self) -> bool:
        """Move to the next statement; False at the end of the text."""
        text = self.text
        while True:
            while self.pos < len(text) and _go_space(text[self.pos]):
                self.pos += 1
            if self.pos >= len(text):
                return False
            if text[self.pos] != "#":
                return True
            end = text.find("\n", self.pos)
            if end < 0:
                return False
            self.pos = end

    def key(self) -> tuple[str, bool]:
        """The statement's key and whether it is bare (its value inherited)."""
        text = self.text
        export = _EXPORT.match(text, self.pos)
        if export is not None:
            self.pos += len("export")
            while self.pos < len(text) and text[self.pos] in _INLINE_SPACE:
                self.pos += 1
            if self.pos >= len(text):
                raise _error(self.line, "zero length string", "remove the lone export")
        start = i = self.pos
        while i < len(text):
            char = text[i]
            if char in "=:\n":
                key = text[start:i].rstrip(_TRAILING_SPACE)
                self.pos = i + 1
                while self.pos < len(text) and text[self.pos] in _INLINE_SPACE:
                    self.pos += 1
                if " " in key:
                    raise _error(
                        self.line,
                        f"key cannot contain a space: {key!r}",
                        "remove the spaces from the name",
                    )
                return key, char == "\n"
            if char not in _INLINE_SPACE and not _key_char(char):
                first = text[start:].split("\n", 1)[0]
                raise _error(
                    text.count("\n", 0, i) + 1,
                    f"unexpected character {char!r} in variable name {first!r}",
                    "a name is letters, digits, _ . - [ ]; remove the character",
                )
            i += 1
        # The text ends inside a name that no `=` follows: Compose reads it as the value of
        # the empty key (a bare `KEY` on the last line without a line end).
        return "", False

    def value(self) -> tuple[str, str | None]:
        """The statement's raw value and its quote (None: unquoted)."""
        text = self.text
        quote = text[self.pos : self.pos + 1]
        if quote not in ("'", '"'):
            end = text.find("\n", self.pos)
            raw = text[self.pos :] if end < 0 else text[self.pos : end]
            self.pos = len(text) if end < 0 else end + 1
            return raw.split(" #", 1)[0].rstrip(_TRAILING_SPACE), None
        chars: list[str] = []
        escaped = False
        for i in range(self.pos + 1, len(text)):
            char = text[i]
            if char == quote and not escaped:
                self.pos = i + 1
                return "".join(chars), quote
            if char == "\\" and not escaped:
                escaped = True
                continue
            if escaped and char != quote:
                chars.append("\\")
            escaped = False
            chars.append(char)
        first = text[self.pos :].split("\n", 1)[0]
        raise _error(
            self.line,
            f"unterminated quoted value {first}",
            f"close the value with its quote ({quote})",
        )


def read_dotenv(
    text: str, source: str, lookup: Mapping[str, str], fallback: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """A dotenv file as Compose reads it (the module's rules); ``${VAR}`` in a value reads
    ``lookup``, then the keys above it, then ``fallback``; a bare ``KEY`` takes its value from
    ``lookup`` (None where it has none).

    Raises:
        DotenvError: a line Compose refuses (a bad character in a name, a space inside one, an
            unterminated quote), or a malformed or missing required reference; ``line`` is
            where in ``source``.
    """
    out: dict[str, str | None] = {}
    scan = _Scanner(text)
    while scan.statement():
        line = scan.line
        key, bare = scan.key()
        if bare:
            # Nothing has it: the key keeps what the file gave it above, if anything.
            found = lookup.get(key)
            if found is not None or key not in out:
                out[key] = found
            continue
        raw, quote = scan.value()
        if quote == "'":
            out[key] = raw
            continue
        if quote == '"':
            raw = _ESCAPE.sub(_unescape, raw)
        own = {k: v for k, v in out.items() if v is not None}
        try:
            out[key] = interpolate(raw, {**(fallback or {}), **own, **lookup}, Interpolation.STRICT)
        except InterpolationError as exc:
            raise DotenvError(
                str(exc),
                line=line,
                rule="env file values are interpolated like the compose file",
                fix="set the variable, or single-quote the value to keep it literal",
            ) from None
    return out


def read_raw_env(text: str, lookup: Mapping[str, str]) -> dict[str, str | None]:
    """An ``env_file`` with ``format: raw``, as Compose reads it: one ``KEY=VALUE`` a line
    (a ``\\r`` before the line end dropped, white space before the key trimmed, a line that
    then starts with ``#`` a comment), the value exactly as written to the line end (no
    quotes, escapes, comments or interpolation); a bare ``KEY`` takes its value from
    ``lookup`` (None where it has none). A leading BOM is dropped.

    Raises:
        DotenvError: a key with a space or tab in it, or none (``=x``).
    """
    out: dict[str, str | None] = {}
    for number, whole in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = whole.removesuffix("\r")
        start = 0
        while start < len(line) and _go_space(line[start]):
            start += 1
        line = line[start:]
        if not line or line.startswith("#"):
            continue
        key, equals, value = line.partition("=")
        if equals and not key:
            raise _raw_error(number, f"no variable name on line {line!r}", "write KEY=VALUE")
        if " " in key or "\t" in key:
            raise _raw_error(
                number,
                f"variable {key!r} contains whitespaces",
                "a raw env file has one KEY=VALUE a line, nothing around the name (no export)",
            )
        if equals:
            out[key] = value
            continue
        found = lookup.get(key)
        if found is not None or key not in out:
            out[key] = found
    return out


def _raw_error(line: int, message: str, fix: str) -> DotenvError:
    return DotenvError(
        message, line=line, rule="a raw env file line is KEY=VALUE, taken as written", fix=fix
    )
