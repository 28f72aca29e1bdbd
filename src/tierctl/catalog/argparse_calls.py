"""Flags registered by hand: ``parser.add_argument(...)`` calls read from source."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any

from tierctl.catalog.static_eval import UNKNOWN, Namespace, dotted_name, first_sentence, jsonable
from tierctl.engine_catalog import Flag, FlagType

# Value parsers the engines use, by name, and the catalog type each one yields.
PARSER_TYPES: dict[str, FlagType] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json": "json",
    "human_readable_int": "int",
    "human_readable_int_or_auto": "str",
    "json.loads": "json",
    "loads": "json",
    "json_list_type": "json",
    "nullable_str": "str",
    "union_dict_and_str": "json",
}

_BOOL_ACTIONS = {
    "store_true": "store_true",
    "store_false": "store_false",
    "BooleanOptionalAction": "boolean_optional",
    "argparse.BooleanOptionalAction": "boolean_optional",
}


def add_argument_calls(tree: ast.AST) -> Iterator[ast.Call]:
    """Every ``<something>.add_argument(...)`` call under ``tree``, in source order."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
    ]
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    yield from calls


def flag_from_call(
    call: ast.Call,
    ns: Namespace,
    *,
    extra_kwargs: dict[str, ast.expr] | None = None,
    resolve_default: Callable[[ast.expr], Any] | None = None,
) -> Flag | None:
    """The flag an ``add_argument`` call registers, or None for positionals and dynamic names.

    ``extra_kwargs`` are keyword arguments known from elsewhere (vLLM's ``**kwargs["field"]``);
    explicit keywords in the call win over them. ``resolve_default`` handles engine-specific
    default expressions (a call like ``_declared_default("x")``) before generic evaluation.
    """
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long_names = [n for n in names if n.startswith("--")]
    if not long_names or len(names) != len(call.args):
        return None
    kwargs: dict[str, ast.expr] = dict(extra_kwargs or {})
    kwargs.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    return flag_from_kwargs(long_names[0], names, kwargs, ns, resolve_default=resolve_default)


def flag_from_kwargs(
    primary: str,
    names: list[str],
    kwargs: dict[str, ast.expr],
    ns: Namespace,
    *,
    resolve_default: Callable[[ast.expr], Any] | None = None,
) -> Flag:
    """Build a flag from argparse keyword arguments given as source expressions: each one is
    evaluated statically, then :func:`build_flag` applies argparse's rules."""
    values: dict[str, Any] = {}
    if "action" in kwargs:
        values["action"] = _action(kwargs["action"])
    if "type" in kwargs:
        values["type"] = dotted_name(kwargs["type"]) or "custom"
    if "nargs" in kwargs:
        nargs = ns.evaluate(kwargs["nargs"])
        values["nargs"] = None if nargs is UNKNOWN else nargs
    if "default" in kwargs:
        raw = resolve_default(kwargs["default"]) if resolve_default else UNKNOWN
        default = ns.evaluate(kwargs["default"]) if raw is UNKNOWN else raw
        values["default"] = jsonable(default) if default is not UNKNOWN else None
    if "choices" in kwargs:
        values["choices"] = ns.evaluate(kwargs["choices"])
    values["help"] = ns.text(kwargs.get("help"))
    dest_value = ns.evaluate(kwargs["dest"]) if "dest" in kwargs else UNKNOWN
    dest = dest_value if isinstance(dest_value, str) else primary.lstrip("-").replace("-", "_")
    return build_flag(primary, names, dest, values, ns)


def build_flag(
    primary: str, names: list[str], dest: str, kw: dict[str, Any], ns: Namespace | None = None
) -> Flag:
    """The one argparse-to-Flag rule set, for every engine's builder.

    ``kw`` holds argparse keywords as plain values: ``action`` (a name: store_true,
    boolean_optional, a custom class), ``type`` (the parser's name), ``nargs``, ``default``,
    ``choices``, ``help``. A custom action class found in ``ns`` contributes the ``nargs`` its
    ``__init__`` defaults to (SGLang's ``DeprecatedAction`` takes no value: nargs=0).
    """
    action = kw.get("action")
    action = action if isinstance(action, str) else None
    type_name = str(kw.get("type") or "str")
    nargs = kw.get("nargs")
    own = _action_class_defaults(action, ns) if action and ns is not None else {}
    if "nargs" not in kw:  # an explicit nargs=None (one value) overrides the class's own
        nargs = own.get("nargs")
    if isinstance(nargs, bool) or not isinstance(nargs, str | int):
        nargs = None
    flag_type: FlagType
    element: FlagType | None = None
    if action in ("store_true", "store_false", "boolean_optional"):
        flag_type = "bool"
    elif nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
        flag_type, element = "list", PARSER_TYPES.get(type_name, "str")
    else:
        flag_type = PARSER_TYPES.get(type_name, "str")
    if "default" in kw:
        default = kw["default"]
    elif "default" in own:
        # A custom action's own default (SGLang's DeprecatedStoreTrueAction: False).
        default = own["default"]
    else:
        default = {"store_true": False, "store_false": True}.get(action or "")
    choices = kw.get("choices")
    help_text = str(kw.get("help") or "")
    return Flag(
        name=primary,
        aliases=tuple(n for n in names if n != primary),
        dest=dest,
        type=flag_type,
        element_type=element,
        parser=type_name if type_name not in ("int", "float", "str", "bool", "json") else None,
        default=jsonable(default),
        choices=tuple(jsonable(c) for c in choices)
        if isinstance(choices, list | tuple | set)
        else None,
        nargs=nargs,
        action=action,
        deprecated=is_deprecated(action, help_text),
        help=first_sentence(help_text),
    )


def _action_class_defaults(action: str, ns: Namespace) -> dict[str, Any]:
    """The ``nargs`` and ``default`` a custom ``argparse.Action`` subclass's ``__init__``
    defaults to (SGLang's deprecated flags take no value: ``nargs=0``)."""
    cls = ns.classes.get(action.rsplit(".", 1)[-1])
    if cls is None:
        return {}
    init = next(
        (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None
    )
    if init is None:
        return {}
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = (
        dict(zip([a.arg for a in positional[-len(args.defaults) :]], args.defaults, strict=True))
        if args.defaults
        else {}
    )
    defaults.update(
        {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
    )
    out: dict[str, Any] = {}
    for key in ("nargs", "default"):
        if key in defaults:
            value = ns.evaluate(defaults[key])
            if value is not UNKNOWN:
                out[key] = value
    return out


def _action(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _BOOL_ACTIONS.get(node.value, node.value)
    name = dotted_name(node)
    if name is None:
        return "custom"
    return _BOOL_ACTIONS.get(name, name.rsplit(".", 1)[-1])


def is_deprecated(action: str | None, help_text: str) -> bool:
    """Whether the engine marks the flag deprecated (its action or its help says so)."""
    if action and "deprecated" in action.lower():
        return True
    head = help_text.strip().lower()
    return head.startswith(("deprecated", "(deprecated", "[deprecated", "note: --")) and (
        "deprecated" in head[:200]
    )
