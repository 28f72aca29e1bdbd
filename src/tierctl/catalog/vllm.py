"""vLLM's flags, read from its source without importing it.

``vllm serve`` registers the OpenAI frontend's flags (``FrontendArgs``: every dataclass field
becomes ``--field-name``), a few explicit ones in ``make_arg_parser``, and the engine's flags in
``EngineArgs.add_cli_args`` (``vllm/engine/arg_utils.py``), most of them as
``group.add_argument("--name", **get_kwargs(SomeConfig)["field"])``. ``get_kwargs`` derives
argparse keywords from the config dataclass field's annotation; :func:`_field_kwargs` mirrors
its rules (booleans get ``--no-`` forms, literals become choices, collections take ``nargs``).
"""

from __future__ import annotations

import ast
import contextvars
from typing import Any

from tierctl.catalog.annotations import read_hints
from tierctl.catalog.argparse_calls import add_argument_calls, build_flag
from tierctl.catalog.static_eval import UNKNOWN, Namespace, dotted_name
from tierctl.engine_catalog import Flag

ENGINE_ARGS = "vllm/engine/arg_utils.py"
# Fields of these config classes accept human-readable integers (1K, 2M) in vLLM.
_HUMAN_INT = {
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "kv_cache_memory_bytes",
    "safetensors_prefetch_block_size",
    "max_num_queued_tokens",
}

# vLLM imports its dependencies whole (those the CPU virtualenv has).
PARSER_STUBS: tuple[str, ...] = ()


def wanted(path: str) -> bool:
    """Whether the builder should read this wheel member for vLLM."""
    return (
        path == ENGINE_ARGS
        or (path.startswith("vllm/config/") and path.endswith(".py"))
        or (path.startswith("vllm/entrypoints/") and path.endswith("/cli_args.py"))
    )


def extract(files: dict[str, str]) -> tuple[list[Flag], str, list[str]]:
    """Flags of one vLLM release (``vllm serve``) from its source files.

    Returns:
        The flags in registration order, the layout found, and the files that defined flags.

    Raises:
        ValueError: the engine-args module or the frontend args are missing.
    """
    if ENGINE_ARGS not in files:
        raise ValueError(f"{ENGINE_ARGS} is not in the wheel")
    trees = {p: ast.parse(text, filename=p) for p, text in sorted(files.items())}
    ns = Namespace()
    _NS.set(ns)
    ns.add_module(trees[ENGINE_ARGS])
    for path, tree in trees.items():
        if path != ENGINE_ARGS:
            ns.add_module(tree)
    frontend_path = next(
        (
            p
            for p, t in trees.items()
            if p.endswith("cli_args.py") and _has_class(t, "FrontendArgs")
        ),
        None,
    )
    if frontend_path is None:
        raise ValueError("no vllm/entrypoints/**/cli_args.py defines FrontendArgs")
    flags: list[Flag] = []
    frontend_tree = trees[frontend_path]
    make_parser = next(
        (
            n
            for n in frontend_tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser"
        ),
        None,
    )
    if make_parser is not None:
        flags.extend(_explicit_calls(make_parser, ns, {}))
    customised = _customisations(ns, "FrontendArgs")
    for cls_name, field_name, hints_node in _class_fields(ns, "FrontendArgs"):
        kwargs = _field_kwargs(ns, cls_name, field_name, hints_node)
        for key, value in customised.get(field_name, {}).items():
            if value is _DELETED:
                kwargs.pop(key, None)
            else:
                kwargs[key] = value
        flags.append(_flag("--" + field_name.replace("_", "-"), [], field_name, kwargs))
    for cls_name in ("EngineArgs", "AsyncEngineArgs"):
        cls = ns.classes.get(cls_name)
        method = _method(cls, "add_cli_args") if cls else None
        if method is not None:
            flags.extend(_explicit_calls(method, ns, _kwargs_sources(method)))
    unique = list({f.name: f for f in reversed(flags)}.values())[::-1]
    used = [ENGINE_ARGS, frontend_path, *sorted(p for p in trees if p.startswith("vllm/config/"))]
    return unique, "config-dataclasses", used


_DELETED = object()
# The namespace of the release being read, for custom action classes (see build_flag).
_NS: contextvars.ContextVar[Namespace | None] = contextvars.ContextVar("vllm_ns", default=None)


def _customisations(ns: Namespace, cls_name: str, depth: int = 0) -> dict[str, dict[str, Any]]:
    """Edits ``_customize_cli_kwargs`` makes to the derived keywords, bases first:
    ``kwargs["field"]["type"] = json.loads`` and ``del kwargs["field"]["nargs"]``."""
    cls = ns.classes.get(cls_name)
    if cls is None or depth > 5:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for base in cls.bases:
        name = dotted_name(base)
        if name:
            for field, edits in _customisations(ns, name.rsplit(".", 1)[-1], depth + 1).items():
                out.setdefault(field, {}).update(edits)
    method = _method(cls, "_customize_cli_kwargs")
    for node in ast.walk(method) if method is not None else ():
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = _field_key(node.targets[0])
            if target is not None:
                out.setdefault(target[0], {})[target[1]] = _keyword_value(target[1], node.value, ns)
        elif isinstance(node, ast.Delete):
            for item in node.targets:
                target = _field_key(item)
                if target is not None:
                    out.setdefault(target[0], {})[target[1]] = _DELETED
    return out


def _field_key(node: ast.expr) -> tuple[str, str] | None:
    """("field", "key") for ``something["field"]["key"]``."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.value, ast.Subscript)
        and isinstance(node.value.slice, ast.Constant)
    ):
        return str(node.value.slice.value), str(node.slice.value)
    return None


def _has_class(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _class_fields(ns: Namespace, cls_name: str, depth: int = 0) -> list[tuple[str, str, ast.expr]]:
    """(class, field, annotation) of a dataclass and its bases, bases first."""
    cls = ns.classes.get(cls_name)
    if cls is None or depth > 5:
        return []
    out: list[tuple[str, str, ast.expr]] = []
    for base in cls.bases:
        base_name = dotted_name(base)
        if base_name:
            out.extend(_class_fields(ns, base_name.rsplit(".", 1)[-1], depth + 1))
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if (dotted_name(stmt.annotation) or "").endswith("ClassVar"):
                continue
            if isinstance(stmt.annotation, ast.Subscript) and (
                dotted_name(stmt.annotation.value) or ""
            ).endswith("ClassVar"):
                continue
            out = [f for f in out if f[1] != stmt.target.id]
            out.append((cls_name, stmt.target.id, stmt.annotation))
    return out


def _field_stmt(ns: Namespace, cls_name: str, field_name: str) -> tuple[ast.AnnAssign, str] | None:
    cls = ns.classes.get(cls_name)
    if cls is None:
        return None
    for i, stmt in enumerate(cls.body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == field_name
        ):
            doc = ""
            nxt = cls.body[i + 1] if i + 1 < len(cls.body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                doc = str(nxt.value.value)
            return stmt, doc
    for base in cls.bases:
        name = dotted_name(base)
        found = _field_stmt(ns, name.rsplit(".", 1)[-1], field_name) if name else None
        if found:
            return found
    return None


def _field_default(node: ast.expr | None, ns: Namespace) -> Any:
    if node is None:
        return None
    if isinstance(node, ast.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] in (
        "field",
        "Field",
    ):
        for kw in node.keywords:
            if kw.arg == "default":
                return ns.evaluate(kw.value)
            if kw.arg == "default_factory":
                name = dotted_name(kw.value) or ""
                return {"list": [], "dict": {}, "set": []}.get(name, UNKNOWN)
        return UNKNOWN
    return ns.evaluate(node)


def _field_kwargs(
    ns: Namespace, cls_name: str, field_name: str, annotation: ast.expr | None = None
) -> dict[str, Any]:
    """argparse keywords ``get_kwargs(cls)[field]`` produces, as plain values."""
    found = _field_stmt(ns, cls_name, field_name)
    if found is None:
        return {"type": "str", "help": ""}
    stmt, doc = found
    hints = read_hints(annotation or stmt.annotation, ns)
    members = hints.non_none()
    kwargs: dict[str, Any] = {"default": _field_default(stmt.value, ns), "help": doc}
    if "class" in members:
        kwargs["type"] = "json"
    elif members == {"bool", "str"}:
        kwargs.update(type="str", nargs="?")
    elif "bool" in members:
        kwargs["action"] = "boolean_optional"
    elif "Literal" in members:
        kwargs["choices"] = list(hints.literals)
        first = type(hints.literals[0]).__name__ if hints.literals else "str"
        kwargs["type"] = first
    elif members & {"list", "tuple", "set"}:
        kwargs.update(type=hints.element or "str", nargs="+")
    elif "int" in members:
        if field_name == "max_model_len":
            kwargs["type"] = "human_readable_int_or_auto"
        elif field_name in _HUMAN_INT:
            kwargs["type"] = "human_readable_int"
        else:
            kwargs["type"] = "int"
    elif "float" in members:
        kwargs["type"] = "float"
    elif "dict" in members:
        kwargs["type"] = "json"
    else:
        kwargs["type"] = "str"
    if hints.optional and kwargs.get("choices") is not None:
        kwargs["choices"].append(None)
    return kwargs


def _kwargs_sources(method: ast.FunctionDef) -> dict[str, tuple[str, str | None]]:
    """Local names bound to ``get_kwargs(Cls)`` (or ``get_kwargs(Cls)["field"]``)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(method):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = node.value
        field: str | None = None
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
            field = str(value.slice.value)
            value = value.value
        if (
            isinstance(value, ast.Call)
            and dotted_name(value.func) == "get_kwargs"
            and value.args
            and dotted_name(value.args[0])
        ):
            out[target.id] = (str(dotted_name(value.args[0])), field)
    return out


def _explicit_calls(
    method: ast.FunctionDef, ns: Namespace, sources: dict[str, tuple[str, str | None]]
) -> list[Flag]:
    flags: list[Flag] = []
    for call in add_argument_calls(method):
        names = [
            a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        long_names = [n for n in names if n.startswith("--")]
        if not long_names or len(names) != len(call.args):
            continue
        kwargs: dict[str, Any] = {}
        dest = long_names[0].lstrip("-").replace("-", "_")
        for kw in call.keywords:
            if kw.arg is None:
                base, field_name, overrides = _splat(kw.value, sources)
                if base is not None and field_name is not None:
                    # The field's kwargs carry no `dest`: argparse names the value after the
                    # flag (`--kv-cache-dtype` -> kv_cache_dtype, not the field cache_dtype),
                    # as the installed engine's own parser shows.
                    kwargs.update(_field_kwargs(ns, base, field_name))
                for key, node in overrides.items():
                    kwargs[key] = _keyword_value(key, node, ns)
            else:
                kwargs[kw.arg] = _keyword_value(kw.arg, kw.value, ns)
        if isinstance(kwargs.get("dest"), str):
            dest = kwargs["dest"]
        flags.append(_flag(long_names[0], names, dest, kwargs))
    return flags


def _splat(
    node: ast.expr, sources: dict[str, tuple[str, str | None]]
) -> tuple[str | None, str | None, dict[str, ast.expr]]:
    """Decode ``**x_kwargs["field"]``, ``**x`` or ``**{**x_kwargs["field"], "default": None}``."""
    if isinstance(node, ast.Dict):
        base: str | None = None
        field: str | None = None
        overrides: dict[str, ast.expr] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                base, field, _ = _splat(value, sources)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                overrides[key.value] = value
        return base, field, overrides
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        src = sources.get(node.value.id)
        if src and isinstance(node.slice, ast.Constant):
            return src[0], str(node.slice.value), {}
    if isinstance(node, ast.Name) and node.id in sources:
        cls_name, field_name = sources[node.id]
        return cls_name, field_name, {}
    return None, None, {}


def _keyword_value(key: str, node: ast.expr, ns: Namespace) -> Any:
    if key == "type":
        # optional_type(str) / parse_type(json.loads) wrap the real parser.
        if isinstance(node, ast.Call) and len(node.args) == 1:
            return dotted_name(node.args[0]) or "custom"
        return dotted_name(node) or "custom"
    if key == "action":
        name = dotted_name(node)
        if name is None:
            value = ns.evaluate(node)
            return value if isinstance(value, str) else "custom"
        return (
            "boolean_optional"
            if name.endswith("BooleanOptionalAction")
            else name.rsplit(".", 1)[-1]
        )
    if key == "help":
        return ns.text(node)
    if key == "default" and (dotted_name(node) or "").endswith("SUPPRESS"):
        return None
    return ns.evaluate(node)


def _flag(primary: str, names: list[str], dest: str, kw: dict[str, Any]) -> Flag:
    kw = dict(kw)
    if "default" not in kw and kw.get("action") in ("store_true", "store_false"):
        kw["default"] = kw.get("action") == "store_false"
    return build_flag(primary, names, dest, kw, _NS.get())
