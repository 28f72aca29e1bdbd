"""SGLang's flags, read from its source without importing it.

Three layouts are handled, checked per release:

- ``fields``: recent releases (0.5.2x) declare flags as annotated fields
  (``A[Optional[int], Arg(help=..., choices=...)] = None``) of namespace structs under
  ``sglang/srt/arg_groups/fields/*.py``; ``ServerArgs.add_cli_args`` registers them with
  ``add_cli_args_from_dataclass`` and adds a few flags by hand.
- ``annotated``: mid releases (around 0.5.16) put the same annotated fields directly on the
  ``ServerArgs`` dataclass in ``sglang/srt/server_args.py``.
- ``argparse``: older releases register every flag with ``parser.add_argument`` in
  ``ServerArgs.add_cli_args``, taking defaults from the dataclass (``ServerArgs.port``).

The field-to-flag mapping mirrors SGLang's ``add_cli_args_from_dataclass``.
"""

from __future__ import annotations

import ast
from typing import Any

from tierctl.catalog.annotations import Hints, read_hints
from tierctl.catalog.argparse_calls import (
    PARSER_TYPES,
    add_argument_calls,
    flag_from_call,
    is_deprecated,
)
from tierctl.catalog.static_eval import (
    UNKNOWN,
    Namespace,
    dotted_name,
    first_sentence,
    jsonable,
)
from tierctl.engine_catalog import Flag, FlagType

SERVER_ARGS = "sglang/srt/server_args.py"
FIELDS_DIR = "sglang/srt/arg_groups/fields/"
# Files that only contribute constants (choice lists) to the namespace.
# argparse_actions.py: the custom action classes, whose __init__ defaults say how many values
# a flag takes (0.5.16 and 0.5.23's deprecated flags take none).
CONSTANT_FILES = (
    "sglang/srt/arg_groups/choices.py",
    "sglang/srt/utils/common.py",
    "sglang/srt/arg_groups/argparse_actions.py",
)

# Packages stood in for when the real parser is built (parser_dump): installed ones too, as
# their import here fails or is slow and none defines a flag.
PARSER_STUBS: tuple[str, ...] = ("torch", "transformers", "triton")


def wanted(path: str) -> bool:
    """Whether the builder should read this wheel member for SGLang."""
    return (
        path == SERVER_ARGS
        or path in CONSTANT_FILES
        or (path.startswith(FIELDS_DIR) and path.endswith(".py"))
    )


def extract(files: dict[str, str]) -> tuple[list[Flag], str, list[str]]:
    """Flags of one SGLang release from its source files.

    Args:
        files: wheel member path -> source text (members selected by :func:`wanted`).

    Returns:
        The flags in registration order, the layout found, and the files that defined flags.

    Raises:
        ValueError: the source has no ``ServerArgs.add_cli_args`` to read.
    """
    if SERVER_ARGS not in files:
        raise ValueError(f"{SERVER_ARGS} is not in the wheel")
    server_tree = ast.parse(files[SERVER_ARGS], filename=SERVER_ARGS)
    field_paths = sorted(p for p in files if p.startswith(FIELDS_DIR))
    field_trees = {p: ast.parse(files[p], filename=p) for p in field_paths}
    ns = Namespace()
    ns.add_module(server_tree)
    for tree in field_trees.values():
        ns.add_module(tree)
    for path in CONSTANT_FILES:
        if path in files:
            ns.add_module(ast.parse(files[path], filename=path))

    server_args = ns.classes.get("ServerArgs")
    add_cli = _method(server_args, "add_cli_args") if server_args else None
    if add_cli is None:
        raise ValueError("ServerArgs.add_cli_args not found in sglang/srt/server_args.py")
    uses_dataclass = any(
        isinstance(n, ast.Call) and dotted_name(n.func) == "add_cli_args_from_dataclass"
        for n in ast.walk(add_cli)
    )

    flags: list[Flag] = []
    used_files: list[str] = [SERVER_ARGS]
    layout = "argparse"
    field_defaults: dict[str, ast.expr] = {}
    if uses_dataclass:
        sources = _namespace_classes(server_tree, ns, field_trees)
        layout = "fields" if sources else "annotated"
        if server_args is not None:
            sources.append(server_args)
        for cls in sources:
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    if stmt.value is not None:
                        field_defaults.setdefault(stmt.target.id, stmt.value)
                    flag = _field_flag(stmt, ns)
                    if flag is not None:
                        flags.append(flag)
        used_files.extend(p for p, t in field_trees.items() if _defines_any(t, sources))
    elif server_args is not None:
        for stmt in server_args.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
            ):
                field_defaults[stmt.target.id] = stmt.value

    def resolve_default(node: ast.expr) -> Any:
        # `_declared_default("x")` (recent) and `ServerArgs.x` (older) both mean "the field's
        # declared default"; the field may sit in a namespace struct, not on ServerArgs.
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.args[0].value
            if isinstance(name, str) and name in field_defaults:
                return _default_value(field_defaults[name], ns)
        name = dotted_name(node)
        if name and name.startswith("ServerArgs.") and name[11:] in field_defaults:
            return _default_value(field_defaults[name[11:]], ns)
        return UNKNOWN

    for call in add_argument_calls(add_cli):
        flag = flag_from_call(call, ns, resolve_default=resolve_default)
        if flag is not None:
            flags.append(flag)
    return _dedupe(flags), layout, used_files


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt
    return None


def _namespace_classes(
    server_tree: ast.Module, ns: Namespace, field_trees: dict[str, ast.Module]
) -> list[ast.ClassDef]:
    """The namespace structs ServerArgs is assembled from, in its declared order."""
    listed: list[str] = []
    for node in server_tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            listed = [e.id for e in node.value.elts if isinstance(e, ast.Name)]
    if not listed:
        # No explicit list: every struct under fields/ that declares a namespace path.
        for tree in field_trees.values():
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and f"{node.name}._NS_PATH" in ns.bindings:
                    listed.append(node.name)
    return [ns.classes[name] for name in listed if name in ns.classes]


def _defines_any(tree: ast.Module, classes: list[ast.ClassDef]) -> bool:
    return any(node in classes for node in tree.body)


def _default_value(node: ast.expr, ns: Namespace) -> Any:
    """A field's default: a literal, a named constant, or ``field(default_factory=list)``."""
    if isinstance(node, ast.Call) and (dotted_name(node.func) or "").endswith("field"):
        for kw in node.keywords:
            if kw.arg == "default":
                return ns.evaluate(kw.value)
            if kw.arg == "default_factory":
                factory = dotted_name(kw.value)
                return {"list": [], "dict": {}, "set": [], "tuple": []}.get(factory or "", UNKNOWN)
        return UNKNOWN
    return ns.evaluate(node)


def _arg_meta(hints: Hints) -> dict[str, ast.expr] | None:
    """The ``Arg(...)`` keywords of a field, or None when the field is not a CLI input."""
    for meta in hints.metadata:
        if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
            return {"help": meta}
        if isinstance(meta, ast.Call) and dotted_name(meta.func) in ("Arg", "arg_utils.Arg"):
            return {kw.arg: kw.value for kw in meta.keywords if kw.arg is not None}
    return None


def _field_flag(stmt: ast.AnnAssign, ns: Namespace) -> Flag | None:
    """The flag ``add_cli_args_from_dataclass`` derives from one annotated field."""
    assert isinstance(stmt.target, ast.Name)
    field_name = stmt.target.id
    hints = read_hints(stmt.annotation, ns)
    meta = _arg_meta(hints)
    if meta is None or ns.evaluate(meta.get("no_cli")) is True:
        return None
    cli_name = ns.evaluate(meta.get("cli_name"))
    primary = cli_name if isinstance(cli_name, str) else "--" + field_name.replace("_", "-")
    aliases_value = ns.evaluate(meta.get("aliases"))
    aliases = tuple(a for a in aliases_value or () if isinstance(a, str))
    default = _default_value(stmt.value, ns) if stmt.value is not None else None
    help_text = ns.text(meta.get("help"))
    parser_name = dotted_name(meta["type_parser"]) if "type_parser" in meta else None
    nargs = ns.evaluate(meta.get("nargs"))
    nargs = nargs if isinstance(nargs, str | int) else None
    choices_value = ns.evaluate(meta.get("choices"))
    choices = (
        tuple(jsonable(c) for c in choices_value)
        if isinstance(choices_value, list | tuple | set)
        else None
    )
    action_node = meta.get("action")
    action: str | None = None
    members = hints.non_none()
    flag_type: FlagType
    element: FlagType | None = None
    if action_node is not None:
        name = dotted_name(action_node) or "custom"
        action = "boolean_optional" if name.endswith("BooleanOptionalAction") else name
        flag_type = "bool" if members == {"bool"} else _scalar(members, parser_name)
        if action not in ("boolean_optional",) and "list" in members:
            flag_type, nargs = "list", nargs or "*"
    elif "Literal" in members and hints.literals:
        choices = choices or tuple(jsonable(v) for v in hints.literals)
        first = type(hints.literals[0]).__name__
        flag_type = PARSER_TYPES.get(parser_name or first, "str")
    elif members & {"list"} and len(members) == 1 and parser_name is None:
        flag_type = "list"
        element = PARSER_TYPES.get(hints.element or "str", "str")
        nargs = nargs or "+"
    elif members == {"bool"}:
        flag_type, action = "bool", "store_true"
    else:
        flag_type = _scalar(members, parser_name)
    return Flag(
        name=primary,
        aliases=aliases,
        dest=field_name,
        type=flag_type,
        element_type=element,
        parser=parser_name if parser_name not in (None, "int", "float", "str") else None,
        default=jsonable(default),
        choices=choices,
        nargs=nargs,
        action=action,
        deprecated=is_deprecated(action, help_text),
        help=first_sentence(help_text),
    )


def _scalar(members: set[str], parser_name: str | None) -> FlagType:
    if parser_name is not None:
        return PARSER_TYPES.get(parser_name, "str")
    if len(members) == 1:
        only = next(iter(members))
        if only in ("int", "float", "str"):
            return only  # type: ignore[return-value]
    return "str"


def _dedupe(flags: list[Flag]) -> list[Flag]:
    """First registration wins, as in argparse (a second one would be a conflict there)."""
    seen: set[str] = set()
    out: list[Flag] = []
    for flag in flags:
        if flag.name in seen:
            continue
        seen.add(flag.name)
        out.append(flag)
    return out
