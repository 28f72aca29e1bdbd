"""A catalog against the engine's real argument parser: every flag, field by field.

The parser is built by the engine's own code in another interpreter
(:mod:`tierctl.catalog.parser_dump`, run by :func:`dump_parser`), which describes each argparse
action as JSON; :func:`compare` holds a catalog against that description: the same flags,
each with the same spellings (hidden ones too), ``dest``, arity (``nargs``), action, value
type, choices and default, and the parser's abbreviation rule. A value the parser could only
get from a stand-in (a package not installed here) is listed as not compared, never guessed.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.catalog.argparse_calls import PARSER_TYPES
from tierctl.engine_catalog import Catalog, Flag
from tierctl.errors import RuntimeFailure

#: The dump script, run by the engine's interpreter (stdlib only).
DUMP_SCRIPT = Path(__file__).with_name("parser_dump.py")

# argparse's action classes by name, as the catalog spells them.
_ACTIONS = {
    "_StoreAction": None,
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "BooleanOptionalAction": "boolean_optional",
    # vLLM 0.33's BooleanOptionalAction (also --disable-x for --enable-x).
    "EnableDisableAction": "boolean_optional",
    "_AppendAction": "append",
    "_StoreConstAction": "store_const",
    "_CountAction": "count",
    "_AppendConstAction": "append_const",
}
# Parsers the catalogs name that the type table does not: vLLM's config-class JSON parser.
_EXTRA_TYPES = {"parse_dataclass": "json"}
_NO_VALUE = {"store_true", "store_false", "boolean_optional", "store_const", "count"}


@dataclass(frozen=True)
class Mismatch:
    """One field of one flag on which the catalog and the parser disagree."""

    flag: str
    field: str
    catalog: Any
    parser: Any

    def __str__(self) -> str:
        return f"{self.flag}: {self.field}: catalog {self.catalog!r}, parser {self.parser!r}"


@dataclass(frozen=True)
class Parity:
    """What comparing a catalog with its engine's parser found."""

    ref: str
    compared: int
    mismatches: tuple[Mismatch, ...]
    not_compared: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """No mismatch."""
        return not self.mismatches


def dump_parser(
    python: Path,
    mode: str,
    root: Path | None = None,
    *,
    stub: Sequence[str] = (),
    probes: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600,
) -> dict[str, Any]:
    """The JSON description of an engine's real parser, built by ``python``.

    Args:
        python: an interpreter with the engine's dependencies (the vLLM CPU virtualenv).
        mode: ``sglang`` or ``vllm``.
        root: the release's source unpacked from its wheel (None: the installed engine).
        stub: packages to stand in for even where installed (torch: its import is slow and
            its presence changes nothing about the flags).
        probes: option tokens to look up as the parser does (``probes`` in the answer: the
            ``dest`` each selects, ``"ambiguous"``, or None).
        env: the environment to run it in (default: this process's).

    Raises:
        RuntimeFailure: the parser could not be built (the script's error tail).
    """
    argv = [str(python), str(DUMP_SCRIPT), mode, *([str(root)] if root else [])]
    run_env = dict(os.environ if env is None else env)
    run_env["TIERCTL_PROBE"] = json.dumps(list(probes))
    if stub:
        run_env["TIERCTL_STUB"] = ",".join(stub)
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, env=run_env, check=False
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeFailure(
            f"could not build {mode}'s parser with {python}: {proc.stderr.strip()[-1500:]}"
        )
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def parser_type(name: Any) -> str:
    """The catalog value type a parser's ``type`` callable gives (``None`` is a string)."""
    if name is None:
        return "str"
    if not isinstance(name, str):
        return "?"
    short = name.rsplit(".", 1)[-1]
    if name == "json.loads":
        return "json"
    return _EXTRA_TYPES.get(short) or PARSER_TYPES.get(short, "str")


def _stub(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value.get("stub")) or any(_stub(v) for v in value.values())
    if isinstance(value, list):
        return any(_stub(v) for v in value)
    return False


def _norm(value: Any) -> Any:
    """A value as JSON compares it (tuples are lists; floats equal to ints stay floats)."""
    return json.loads(json.dumps(value, default=repr))


def _arity(flag: Flag) -> Any:
    if flag.nargs is not None:
        return flag.nargs
    return 0 if flag.action in _NO_VALUE else None


def compare_flag(flag: Flag, action: Mapping[str, Any]) -> tuple[list[Mismatch], list[str]]:
    """The fields on which one catalog flag and its parser action disagree, and the fields
    that could not be compared (a stand-in value)."""
    out: list[Mismatch] = []
    skipped: list[str] = []

    def check(name: str, ours: Any, theirs: Any) -> None:
        if _stub(theirs):
            skipped.append(f"{flag.name}: {name} (from a stand-in)")
        elif _norm(ours) != _norm(theirs):
            out.append(Mismatch(flag.name, name, ours, theirs))

    kind = str(action["kind"])
    real_action = _ACTIONS.get(kind, kind)
    check("spellings", sorted(flag.spellings()), sorted(action["option_strings"]))
    check("dest", flag.dest, action["dest"])
    check("nargs", _arity(flag), action["nargs"])
    check("action", flag.action, real_action)
    nargs = action["nargs"]
    listed = nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1)
    if real_action not in _NO_VALUE:
        ptype = parser_type(action["type"])
        if listed:
            check("type", (flag.type, flag.element_type or "str"), ("list", ptype))
        else:
            check("type", flag.type, ptype)
    choices = action["choices"]
    ours = None if flag.choices is None else sorted(map(repr, _norm(list(flag.choices))))
    theirs = (
        None
        if choices is None
        else (choices if _stub(choices) else sorted(map(repr, _norm(choices))))
    )
    check("choices", ours, theirs)
    check("default", flag.default, _default_of(action))
    return out, skipped


def compare(catalog: Catalog, dump: Mapping[str, Any]) -> Parity:
    """Every flag of ``catalog`` against the parser ``dump`` describes (see :func:`dump_parser`),
    and every option of the parser against the catalog."""
    mismatches: list[Mismatch] = []
    skipped: list[str] = []
    if bool(dump["allow_abbrev"]) != catalog.abbreviations:
        mismatches.append(
            Mismatch("(parser)", "abbreviations", catalog.abbreviations, dump["allow_abbrev"])
        )
    by_spelling = {s: f for f in catalog.flags.values() for s in f.spellings()}
    seen: set[str] = set()
    compared = 0
    for action in dump["actions"]:
        options = [o for o in action["option_strings"] if o.startswith("-")]
        if not options or action["kind"] == "_HelpAction":
            continue
        flag = next((by_spelling[o] for o in options if o in by_spelling), None)
        if flag is None:
            mismatches.append(Mismatch(options[0], "flag", None, "in the parser"))
            continue
        seen.add(flag.name)
        compared += 1
        found, not_compared = compare_flag(flag, action)
        mismatches.extend(found)
        skipped.extend(not_compared)
    for name in catalog.flags:
        if name not in seen:
            mismatches.append(Mismatch(name, "flag", "in the catalog", None))
    return Parity(catalog.ref, compared, tuple(mismatches), tuple(skipped))


def _default_of(action: Mapping[str, Any]) -> Any:
    default = action["default"]
    if default == "==SUPPRESS==":
        return None
    if isinstance(default, dict) and set(default) == {"repr"}:
        return default["repr"]  # an object the parser builds: its repr, as the catalog keeps it
    return default


def _flag_from_action(action: Mapping[str, Any], before: Flag | None) -> Flag:
    """The catalog entry the parser's ``action`` makes; what the parser cannot say (help,
    deprecation, a value from a stand-in) is kept from the statically read ``before``."""
    kind = str(action["kind"])
    real_action = _ACTIONS.get(kind, kind)
    options = [o for o in action["option_strings"] if o.startswith("-")]
    negative = set(action.get("negative") or ())
    primary = before.name if before is not None and before.name in options else options[0]
    positive = [o for o in options if o not in negative]
    nargs = action["nargs"]
    listed = nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1)
    type_name = action["type"]
    ptype = parser_type(type_name)
    short = type_name.rsplit(".", 1)[-1] if isinstance(type_name, str) else None
    flag_type: Any = "bool" if real_action in _NO_VALUE and real_action != "count" else ptype
    element: Any = None
    if real_action not in _NO_VALUE and listed:
        flag_type, element = "list", ptype
    if ptype == "?":
        flag_type = before.type if before is not None else "str"
    plain = {"int", "float", "str", "bool", "json", "loads"}
    generated = {o for o in options if o.startswith("--no-")}
    choices = action["choices"]
    if _stub(choices):
        choices = list(before.choices) if before is not None and before.choices else None
    default = _default_of(action)
    if _stub(default):
        default = before.default if before is not None else None
    return Flag(
        name=primary,
        aliases=tuple(
            o
            for o in positive
            if o != primary and not (real_action == "boolean_optional" and o in generated)
        ),
        negations=tuple(
            sorted(o for o in negative if not (o.startswith("--no-") and o[5:] in _bare(positive)))
        ),
        dest=str(action["dest"]),
        type=flag_type,
        element_type=element,
        parser=short if short and short not in plain and ptype != "?" else None,
        default=default,
        choices=None if choices is None else tuple(choices),
        nargs=None if real_action in _NO_VALUE and nargs == 0 else nargs,
        action=real_action,
        deprecated=before.deprecated if before is not None else False,
        help=before.help if before is not None else "",
    )


def _bare(options: Sequence[str]) -> set[str]:
    return {o[2:] for o in options if o.startswith("--")}


def refine(catalog: Catalog, dump: Mapping[str, Any]) -> Catalog:
    """``catalog`` (read statically) corrected by the engine's real parser: every flag the
    parser registers, with its spellings, ``dest``, arity, action, type, choices and default
    as the parser has them; help and deprecation stay as read from the source."""
    by_spelling = {s: f for f in catalog.flags.values() for s in f.spellings()}
    flags: dict[str, Flag] = {}
    for action in dump["actions"]:
        options = [o for o in action["option_strings"] if o.startswith("-")]
        if not options or action["kind"] == "_HelpAction":
            continue
        before = next((by_spelling[o] for o in options if o in by_spelling), None)
        flag = _flag_from_action(action, before)
        flags[flag.name] = flag
    refined = Catalog(
        engine=catalog.engine,
        version=catalog.version,
        source=catalog.source,
        flags=flags,
        abbreviations=bool(dump["allow_abbrev"]),
        underscores=catalog.underscores,
    )
    return refined.with_parser(underscores=catalog.parser_underscores)
