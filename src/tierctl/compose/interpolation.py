"""Compose variable interpolation, in the three modes tierctl reads files in.

Compose substitutes ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
``${VAR:?message}``, ``${VAR?message}``, ``${VAR:+alt}``, ``${VAR+alt}`` (nested in the
default/alt part) and writes ``$$`` for a literal ``$``; a ``$`` followed by anything else
(``$1``, ``$ ``, a trailing ``$``) is a literal ``$``. A malformed braced reference (``${A``,
``${A!}``) is an error in every mode, as it is for ``docker compose config``. The rules follow
compose-go's ``template`` package; its test table is ported in the unit tests.

Validation reads files on a machine that does not have the deployment's secrets, so it keeps
every reference as written (:attr:`Interpolation.KEEP`). A plan compares files, not hosts: it
applies defaults but keeps an unset required variable (``${HF_TOKEN:?...}``, how the renderer
writes secrets) as written, so secret values stay out of plans and a changed expression still
shows (:attr:`Interpolation.DEFAULTS`). With a real environment, an unset required variable
fails as it would on deploy (:attr:`Interpolation.STRICT`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = (":-", ":?", ":+", "-", "?", "+")


class InterpolationError(ValueError):
    """A malformed ``$`` reference, or (strict mode) an unset required variable."""


class MissingVariable(InterpolationError):
    """STRICT mode: a required variable (``${NAME:?message}``) is unset."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"required variable {name} is missing a value: {message}")
        self.name = name


class Interpolation(enum.Enum):
    """How references are treated when a compose file is read."""

    AS_WRITTEN = "as-written"
    """Nothing substituted and ``$$`` kept: the text compose would interpolate, exactly
    (``tierctl import`` copies it into a spec, whose renderer writes it back as is).
    Malformed references are still errors."""
    KEEP = "keep"
    """Every reference kept as written (only ``$$`` becomes ``$``); needs no variables."""
    DEFAULTS = "defaults"
    """Substituted from the environment (empty unless given), defaults applied; an unset
    required variable is kept as written."""
    STRICT = "strict"
    """Substituted from the environment; an unset required variable is an error."""


@dataclass(frozen=True)
class VarRef:
    """One variable reference as written: ``${NAME<operator><argument>}``."""

    name: str
    operator: str | None
    argument: str | None
    text: str  # the reference exactly as written

    @property
    def required(self) -> bool:
        """``${VAR:?msg}`` / ``${VAR?msg}``: deployment fails when unset."""
        return self.operator in (":?", "?")


# compose-go's template pattern after "${": a name, optionally an operator and anything up to
# the last "}" on the line (Go's "." stops at a newline). Case-insensitive, as in compose.
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::?[-+?](.*))?\}")


def _first_closing(text: str, start: int, stop: int) -> int:
    """compose-go's getFirstBraceClosingIndex over ``text[start:stop]``: every ``{`` opens
    (skipping the character after it), every ``}`` closes; the index just past the ``}``
    that balances the first ``{``, or -1."""
    depth = 0
    i = start
    while i < stop:
        ch = text[i]
        if ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        if ch == "{":
            depth += 1
            i += 1
        i += 1
    return -1


def parse(text: str) -> list[str | VarRef]:
    """Split a string into literal pieces (``$$`` already unescaped) and references.

    As in compose, a ``$`` followed by neither ``$``, a name nor ``{`` is a literal ``$``
    (``awk '{print $1}'``, ``cost $5``, ``^REGEX$``); the reference ``${...}`` ends at the
    ``}`` that balances its ``{`` counting every brace, so ``${J:-{"a":1}}`` is one reference.

    Raises:
        InterpolationError: a malformed braced reference such as ``${}``, ``${ A}``,
            ``${A!}`` or an unclosed ``${A``.
    """
    pieces: list[str | VarRef] = []
    literal: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        dollar = text.find("$", i)
        if dollar == -1:
            literal.append(text[i:])
            break
        literal.append(text[i:dollar])
        nxt = text[dollar + 1] if dollar + 1 < n else ""
        if nxt == "$":
            literal.append("$")
            i = dollar + 2
            continue
        if nxt == "{":
            match = _BRACED.match(text, dollar + 2)
            if match is None:
                if "}" not in text[dollar:]:
                    raise InterpolationError(f"unclosed '${{' in {text!r}")
                raise InterpolationError(
                    f"invalid interpolation format in {text!r}: '${{' must be followed by a "
                    "variable name, an optional :- - :? ? :+ + part and '}'"
                )
            end = _first_closing(text, dollar, match.end())
            if end == -1:
                end = match.end()
            ref = _braced(text[dollar:end])
        else:
            named = _NAME.match(text, dollar + 1)
            if named is None:
                literal.append("$")  # a lone '$' is literal, as in compose
                i = dollar + 1
                continue
            end = named.end()
            ref = VarRef(named.group(0), None, None, text[dollar:end])
        if literal and "".join(literal):
            pieces.append("".join(literal))
        literal = []
        pieces.append(ref)
        i = end
    if literal and "".join(literal):
        pieces.append("".join(literal))
    return pieces


def _braced(ref_text: str) -> VarRef:
    body = ref_text[2:-1]
    match = _NAME.match(body)
    if match is None:
        raise InterpolationError(f"invalid interpolation format: {ref_text!r} has no variable name")
    rest = body[match.end() :]
    if not rest:
        return VarRef(match.group(0), None, None, ref_text)
    for op in _OPERATORS:
        if rest.startswith(op):
            argument = rest[len(op) :]
            parse(argument)  # a nested reference must be well-formed too
            return VarRef(match.group(0), op, argument, ref_text)
    raise InterpolationError(
        f"invalid interpolation format: {ref_text!r} (allowed after the name: :-  -  :?  ?  :+  +)"
    )


def references(text: str) -> list[VarRef]:
    """The references in ``text`` (outermost only)."""
    return [p for p in parse(text) if isinstance(p, VarRef)]


def interpolate(
    text: str, env: Mapping[str, str] | None = None, mode: Interpolation | None = None
) -> str:
    """Substitute references in ``text`` as ``mode`` says.

    Args:
        text: a string value from a compose file.
        env: the variables; an absent one is unset. Ignored in KEEP mode.
        mode: KEEP, DEFAULTS or STRICT; default KEEP without ``env``, STRICT with it.

    Raises:
        InterpolationError: malformed text, or (STRICT) a required variable unset in ``env``.
    """
    if "$" not in text:
        return text
    if mode is None:
        mode = Interpolation.KEEP if env is None else Interpolation.STRICT
    if mode is Interpolation.AS_WRITTEN:
        parse(text)  # refuse what compose would refuse
        return text
    variables: Mapping[str, str] = env or {}
    out: list[str] = []
    for piece in parse(text):
        if isinstance(piece, str):
            out.append(piece)
        elif mode is Interpolation.KEEP:
            out.append(piece.text)
        else:
            out.append(_resolve(piece, variables, mode))
    return "".join(out)


def _resolve(ref: VarRef, env: Mapping[str, str], mode: Interpolation) -> str:
    value = env.get(ref.name)
    empty = value is None or value == ""
    arg = ref.argument or ""
    if ref.operator == ":-":
        return interpolate(arg, env, mode) if empty else str(value)
    if ref.operator == "-":
        return interpolate(arg, env, mode) if value is None else value
    if ref.operator in (":?", "?"):
        missing = empty if ref.operator == ":?" else value is None
        if missing and mode is Interpolation.DEFAULTS:
            return ref.text
        if missing:
            raise MissingVariable(ref.name, arg)
        return str(value)
    if ref.operator == ":+":
        return "" if empty else interpolate(arg, env, mode)
    if ref.operator == "+":
        return "" if value is None else interpolate(arg, env, mode)
    return value or ""
