"""Reading type annotations from source: which basic types a field's annotation allows.

Both engines derive a flag's argparse behaviour from its field's annotation (SGLang's
``A[Optional[int], "help"]`` fields, vLLM's config dataclasses), so the catalog builder needs
the same view of an annotation that ``typing.get_type_hints`` would give, without importing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from tierctl.catalog.static_eval import UNKNOWN, Namespace, dotted_name

_BASIC = {"bool", "int", "float", "str", "bytes", "dict", "list", "tuple", "set", "Any"}
_LIST_LIKE = {
    "list": "list",
    "List": "list",
    "Sequence": "list",
    "tuple": "tuple",
    "Tuple": "tuple",
    "set": "set",
    "Set": "set",
    "frozenset": "set",
}
_DICT_LIKE = {"dict", "Dict", "Mapping", "MutableMapping"}


@dataclass
class Hints:
    """The flattened members of an annotation's unions."""

    names: set[str] = field(default_factory=set)
    literals: list[Any] = field(default_factory=list)
    element: str | None = None
    metadata: list[ast.expr] = field(default_factory=list)
    classes: set[str] = field(default_factory=set)

    @property
    def optional(self) -> bool:
        """Whether None is allowed."""
        return "None" in self.names

    def non_none(self) -> set[str]:
        """Member names other than None."""
        return self.names - {"None"}


def read_hints(node: ast.expr | None, ns: Namespace, depth: int = 0) -> Hints:
    """Flatten an annotation into :class:`Hints` (aliases resolved through ``ns``)."""
    hints = Hints()
    if node is not None:
        _walk(node, ns, hints, depth)
    return hints


def _walk(node: ast.expr, ns: Namespace, hints: Hints, depth: int) -> None:
    if depth > 10:
        hints.names.add("other")
        return
    if isinstance(node, ast.Constant):
        if node.value is None:
            hints.names.add("None")
        elif isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                hints.names.add("other")
                return
            _walk(parsed, ns, hints, depth + 1)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _walk(node.left, ns, hints, depth + 1)
        _walk(node.right, ns, hints, depth + 1)
        return
    if isinstance(node, ast.Subscript):
        _walk_subscript(node, ns, hints, depth)
        return
    name = dotted_name(node)
    if name is None:
        hints.names.add("other")
        return
    short = name.rsplit(".", 1)[-1]
    if short in _BASIC:
        hints.names.add(short)
    elif short in _LIST_LIKE:
        hints.names.add(_LIST_LIKE[short])
    elif short in _DICT_LIKE:
        hints.names.add("dict")
    elif short == "NoneType":
        hints.names.add("None")
    elif name in ns.bindings and _looks_like_annotation(ns.bindings[name]):
        _walk(ns.bindings[name], ns, hints, depth + 1)
    elif short in ns.classes:
        hints.classes.add(short)
        hints.names.add("class")
    else:
        hints.names.add("other")


def _walk_subscript(node: ast.Subscript, ns: Namespace, hints: Hints, depth: int) -> None:
    base = (dotted_name(node.value) or "").rsplit(".", 1)[-1]
    args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base == "Optional":
        _walk(args[0], ns, hints, depth + 1)
        hints.names.add("None")
    elif base == "Union":
        for arg in args:
            _walk(arg, ns, hints, depth + 1)
    elif base in ("Annotated", "A"):
        _walk(args[0], ns, hints, depth + 1)
        hints.metadata.extend(args[1:])
    elif base == "Literal":
        hints.names.add("Literal")
        for arg in args:
            nested = _nested_literal(arg, ns, depth)
            if nested is not None:
                # Literal["auto", RunnerType] with RunnerType = Literal["generate", ...]:
                # typing flattens nested literals, and so must the choices.
                hints.literals.extend(v for v in nested.literals if v not in hints.literals)
                continue
            value = ns.evaluate(arg)
            if value is not UNKNOWN and value not in hints.literals:
                hints.literals.append(value)
    elif base in _LIST_LIKE:
        hints.names.add(_LIST_LIKE[base])
        if args:
            inner = read_hints(args[0], ns, depth + 1).non_none()
            hints.element = next(iter(inner)) if len(inner) == 1 else "str"
    elif base in _DICT_LIKE:
        hints.names.add("dict")
    elif base in ("ClassVar", "Final", "InitVar"):
        _walk(args[0], ns, hints, depth + 1)
    else:
        _walk(node.value, ns, hints, depth + 1)


def _nested_literal(arg: ast.expr, ns: Namespace, depth: int) -> Hints | None:
    """The hints of a Literal argument that is itself a Literal (written or by alias)."""
    target: ast.expr | None = arg
    for _ in range(5):
        if isinstance(target, ast.Subscript):
            base = (dotted_name(target.value) or "").rsplit(".", 1)[-1]
            return read_hints(target, ns, depth + 1) if base == "Literal" else None
        name = dotted_name(target) if target is not None else None
        if name is None or name not in ns.bindings:
            return None
        target = ns.bindings[name]
    return None


def _looks_like_annotation(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return True
    return isinstance(node, ast.Name) and node.id in _BASIC
