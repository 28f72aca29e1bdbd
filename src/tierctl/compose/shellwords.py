"""Splitting a string ``command``/``entrypoint`` the way docker compose does.

Compose (compose-go) splits a string command with the go-shellwords parser (no environment
expansion, no backticks run), which differs from a POSIX shell and from :mod:`shlex`:

- outside quotes, ``;``, ``&``, ``|``, ``<`` and ``>`` end the command: the tokens before it
  are kept and the rest is dropped silently (``sh -c echo a; echo b`` runs ``sh -c echo a``);
  a ``2>`` redirect drops its leading digit token too;
- a backslash escapes the next character everywhere except inside single quotes, and ``\\t`` /
  ``\\n`` after a backslash become a tab / newline;
- a bare ``(`` or ``)`` is an error; ``$(...)`` is kept as one literal token;
- an unclosed quote, backtick or ``$(`` is an error.

:func:`split_shell_words` returns the tokens and where the line was cut (or -1), so a reader
can say what compose silently dropped.
"""

from __future__ import annotations

_SPACES = frozenset(" \t\r\n")
_CUTS = frozenset(";&|<>")


class ShellWordsError(ValueError):
    """A line go-shellwords refuses (unbalanced quotes, a bare parenthesis)."""


def split_shell_words(line: str) -> tuple[list[str], int]:
    """Split ``line`` as go-shellwords' ``Parse`` does (ParseEnv and ParseBacktick off).

    Returns:
        The tokens, and the character index where an unquoted ``;&|<>`` cut the line
        (-1 when the whole line was read).

    Raises:
        ShellWordsError: an unclosed quote/backtick/``$(``, a trailing backslash, a bare
            ``(`` or an unmatched ``)``.
    """
    args: list[str] = []
    buf: list[str] = []
    escaped = double = single = back = dollar = False
    got = False  # a token is being built (possibly empty, from "")
    pos = -1
    i = -1
    for ch in line:
        i += 1
        if escaped:
            buf.append("\t" if ch == "t" else "\n" if ch == "n" else ch)
            escaped = False
            got = True
            continue
        if ch == "\\":
            if single:
                buf.append(ch)
            else:
                escaped = True
            continue
        if ch in _SPACES:
            if single or double or back or dollar:
                buf.append(ch)
            elif got:
                args.append("".join(buf))
                buf = []
                got = False
            continue
        if ch == "`":
            if not single and not double and not dollar:
                back = not back
        elif ch == ")":
            if not single and not double and not back:
                if not dollar:
                    raise ShellWordsError("an unmatched ')' outside quotes")
                buf.append(ch)
                dollar = False
                got = True
                continue
        elif ch == "(":
            if not single and not double and not back:
                if not dollar and buf and buf[-1] == "$":
                    dollar = True
                    buf.append(ch)
                    continue
                raise ShellWordsError("a '(' outside quotes")
        elif ch == '"':
            if not single and not dollar:
                if double:
                    got = True
                double = not double
                continue
        elif ch == "'":
            if not double and not dollar:
                if single:
                    got = True
                single = not single
                continue
        elif ch in _CUTS and not (single or double or back or dollar):
            if ch == ">" and buf and buf[0].isdigit() and buf[0].isascii():
                i -= 1
                got = False
            pos = i
            break
        got = True
        buf.append(ch)
    if got:
        args.append("".join(buf))
    if escaped or single or double or back or dollar:
        raise ShellWordsError("an unclosed quote, backtick, '$(' or a trailing backslash")
    return args, pos
