"""Static evaluation of engine source: constants, help strings and type annotations.

The catalog builder never imports an engine (that would need torch, CUDA and the engine's
whole dependency tree); it reads the source with :mod:`ast` and evaluates only what can be
evaluated without running code: literals, names bound to literals, list concatenation and
f-strings. Anything else is :data:`UNKNOWN`, and the catalog records "not known" rather than
guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Final


class _Unknown:
    """Marker for a value that cannot be computed statically."""

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        # Falsy, so `value or default` treats "not known" like "not given".
        return False


UNKNOWN: Final = _Unknown()

_MAX_DEPTH = 8


@dataclass
class Namespace:
    """Module-level and class-level bindings collected from several source files.

    Keys are bare names (``LOAD_FORMAT_CHOICES``) and dotted class attributes
    (``Backend.ALL``, ``ServerArgs.port``). Later files do not overwrite earlier bindings,
    so the file that defines flags should be added first.
    """

    bindings: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)

    def add_module(self, tree: ast.Module) -> None:
        """Record the module's top-level assignments and classes (recursively for classes)."""
        for node in tree.body:
            self._add_stmt(node, prefix="")

    def _add_stmt(self, node: ast.stmt, prefix: str) -> None:
        if isinstance(node, ast.Assign) and node.value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.bindings.setdefault(prefix + target.id, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                self.bindings.setdefault(prefix + node.target.id, node.value)
        elif isinstance(node, ast.ClassDef) and not prefix:
            self.classes.setdefault(node.name, node)
            for stmt in node.body:
                self._add_stmt(stmt, prefix=node.name + ".")

    def evaluate(self, node: ast.expr | None, depth: int = 0) -> Any:
        """The value of an expression, or UNKNOWN."""
        if node is None or depth > _MAX_DEPTH:
            return UNKNOWN
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            # A set literal iterates in hash order, which changes between runs; catalogs must
            # be byte-identical when rebuilt, so sets become sorted lists.
            if isinstance(value, set | frozenset):
                return sorted(value, key=repr)
            return value
        if isinstance(node, ast.Name | ast.Attribute):
            dotted = dotted_name(node)
            if dotted is not None and dotted in self.bindings:
                return self.evaluate(self.bindings[dotted], depth + 1)
            return UNKNOWN
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    inner = self.evaluate(elt.value, depth + 1)
                    if inner is UNKNOWN or not isinstance(inner, list | tuple | set):
                        return UNKNOWN
                    items.extend(inner)
                    continue
                value = self.evaluate(elt, depth + 1)
                if value is UNKNOWN:
                    return UNKNOWN
                items.append(value)
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.evaluate(node.left, depth + 1)
            right = self.evaluate(node.right, depth + 1)
            if left is UNKNOWN or right is UNKNOWN:
                return UNKNOWN
            try:
                return left + right
            except TypeError:
                if isinstance(left, list | tuple) and isinstance(right, list | tuple):
                    return [*left, *right]
                return UNKNOWN
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            # Defaults written as arithmetic (1024 * 1024, 8 << 10, MAX // 2): numbers only.
            left = self.evaluate(node.left, depth + 1)
            right = self.evaluate(node.right, depth + 1)
            if not _number(left) or not _number(right):
                return UNKNOWN
            try:
                result = _ARITHMETIC[type(node.op)](left, right)
            except (ArithmeticError, ValueError):
                return UNKNOWN
            return result if _number(result) and abs(result) < 2**63 else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = self.evaluate(node.operand, depth + 1)
            if not _number(inner):
                return UNKNOWN
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("list", "tuple", "sorted", "set") and len(node.args) == 1:
                inner = self.evaluate(node.args[0], depth + 1)
                if isinstance(inner, dict):
                    inner = list(inner)
                if isinstance(inner, list | tuple | set):
                    values = list(inner)
                    return sorted(values, key=str) if node.func.id == "sorted" else values
            return UNKNOWN
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "keys"
            and not node.args
        ):
            inner = self.evaluate(node.func.value, depth + 1)
            return list(inner) if isinstance(inner, dict) else UNKNOWN
        return UNKNOWN

    def text(self, node: ast.expr | None) -> str:
        """Help text: string pieces evaluated, unknown f-string parts shown as ``{...}``."""
        if node is None:
            return ""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                else:
                    parts.append("{...}")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left) + self.text(node.right)
        value = self.evaluate(node)
        return value if isinstance(value, str) else ""


_ARITHMETIC: dict[type, Any] = {
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.LShift: lambda a, b: a << b if isinstance(a, int) and 0 <= b < 64 else UNKNOWN,
    ast.Pow: lambda a, b: a**b if abs(b) < 64 else UNKNOWN,
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def first_sentence(text: str) -> str:
    """The first sentence of help text (docstrings wrap lines, so a paragraph is joined)."""
    paragraph: list[str] = []
    for line in text.strip().splitlines():
        line = line.strip()
        if not line:
            if paragraph:
                break
            continue
        paragraph.append(line)
    joined = " ".join(paragraph).replace("%%", "%")
    end = joined.find(". ")
    if end != -1:
        joined = joined[: end + 1]
    return joined[:300]


def jsonable(value: Any) -> Any:
    """A JSON-friendly form of a statically known value; other values as their repr."""
    if value is UNKNOWN:
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, set | frozenset):
        return [jsonable(v) for v in sorted(value, key=repr)]
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return repr(value)
