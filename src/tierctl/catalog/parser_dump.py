"""Build an engine's real argument parser and print every action as JSON (stdlib only).

Run by another interpreter, not imported by tierctl: ``python parser_dump.py MODE [ROOT]``,
where MODE is ``sglang`` (``ServerArgs.add_cli_args`` on the ``argparse.ArgumentParser``
``prepare_server_args`` makes) or ``vllm`` (the ``vllm serve`` sub-parser vLLM's CLI makes,
through ``ServeSubcommand.subparser_init``), and ROOT a folder holding the release's Python
source (unpacked from its wheel) that is imported instead of any installed copy.

The engine's own modules run for real, so the parser is built by the engine's own
``add_argument`` calls. What cannot run here is stood in for, and reported:

- a package that is not installed (torch, CUDA kernels) or is named in ``TIERCTL_STUB`` is a
  stub whose every attribute is a permissive placeholder (``stubbed``);
- an engine module whose body fails on such a placeholder keeps what it defined before the
  failure and answers placeholders for the rest (``degraded``, with the error).

A flag whose default, type or choices is a placeholder is marked ``"stub"`` in the output, so
the comparison (:mod:`tierctl.catalog.parity`) says it could not compare it instead of
guessing. Output: one JSON object on the last line of stdout.
"""

from __future__ import annotations

import sys

# This file's folder holds tierctl's own vllm.py and sglang.py: never import those as the engine.
if sys.path and sys.path[0] == __file__.rsplit("/", 1)[0]:
    sys.path.pop(0)

import argparse
import enum
import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import types
from typing import Any


class Placeholder:
    """Whatever a stubbed package hands out: callable, subscriptable, iterable (empty), a
    decorator that returns what it decorates, a base class that adds nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Placeholder()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Placeholder()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return ()

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __or__(self, other: Any) -> Any:
        return self

    __ror__ = __or__

    def __getitem__(self, key: Any) -> Any:
        return self

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __len__(self) -> int:
        return 0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class StubModule(types.ModuleType):
    """A module that answers a placeholder for any name it does not define."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Placeholder()


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stubs packages: named ones always (first finder), missing ones (last finder)."""

    def __init__(self, always: set[str], last: bool) -> None:
        self.always = always
        self.last = last
        self.tops: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top.startswith("_"):
            return None
        if not self.last and top not in self.always:
            return None
        # A missing submodule of a real package stays missing, as it would be.
        if self.last and "." in name and top not in self.tops:
            return None
        self.tops.add(top)
        STUBBED.add(top)
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = StubModule(spec.name)
        module.__path__ = []
        # Version checks at import (torch >= 2.x) read it.
        module.__dict__["__version__"] = os.environ.get("TIERCTL_STUB_VERSION", "2.9.0")
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Forgiving(importlib.abc.MetaPathFinder):
    """Imports the engine's own modules for real; one whose body fails is degraded."""

    def __init__(self, package: str) -> None:
        self.prefix = package + "."

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith(self.prefix):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ForgivingLoader(spec.loader)
        return spec


class _ForgivingLoader(importlib.abc.Loader):
    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        try:
            self.real.exec_module(module)
        except Exception as exc:  # any failure: keep what ran, answer placeholders
            DEGRADED.append([module.__name__, f"{type(exc).__name__}: {exc}"[:200]])
            module.__class__ = StubModule


STUBBED: set[str] = set()
DEGRADED: list[list[str]] = []


def _install(package: str, root: str | None) -> None:
    if root:
        sys.path.insert(0, root)
    if root and package == "sglang":
        # The package's __init__ imports far more than its flags need (a frontend, kernels):
        # the package and its server subpackage are bare namespaces over the same folders.
        for name in (package, f"{package}.srt"):
            folder = os.path.join(root, *name.split("."))
            if os.path.isdir(folder):
                bare = types.ModuleType(name)
                bare.__path__ = [folder]
                sys.modules[name] = bare
    always = {s for s in os.environ.get("TIERCTL_STUB", "").split(",") if s}
    sys.meta_path.insert(0, _Stubs(always, last=False))
    if root:
        # Only a release's source unpacked beside another installation needs standing in
        # for: an installed engine imports whole, as it does when it runs.
        sys.meta_path.insert(0, _Forgiving(package))
        sys.meta_path.append(_Stubs(always, last=True))


def sglang_parser() -> argparse.ArgumentParser:
    """The parser ``prepare_server_args`` builds (a plain ``argparse.ArgumentParser``)."""
    server_args = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def vllm_parser() -> argparse.ArgumentParser:
    """The ``vllm serve`` sub-parser, as ``vllm``'s CLI main builds it."""
    serve = importlib.import_module("vllm.entrypoints.cli.serve")
    try:
        utils = importlib.import_module("vllm.utils.argparse_utils")
    except ImportError:
        utils = importlib.import_module("vllm.utils")
    top = utils.FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    parser: argparse.ArgumentParser = serve.ServeSubcommand().subparser_init(subparsers)
    return parser


def _value(value: Any) -> Any:
    """A parser value as JSON; a placeholder is ``"stub"``, anything else not JSON its repr."""
    if isinstance(value, Placeholder | StubModule):
        return {"stub": True}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return _value(value.value)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_value(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    return {"repr": repr(value)[:200]}


def _choices(choices: Any) -> Any:
    """A parser's choices as :func:`_value` takes them: a set stays a set (sorted there)."""
    return choices if isinstance(choices, set | frozenset) else list(choices)


def _type_name(kind: Any) -> Any:
    if kind is None:
        return None
    if isinstance(kind, Placeholder | StubModule):
        return {"stub": True}
    if isinstance(kind, functools.partial):
        return _type_name(kind.func)
    if "<locals>" in (getattr(kind, "__qualname__", "") or ""):
        # A parser made by a factory (vLLM's optional_type(int)): what it wraps decides.
        inner = [c.cell_contents for c in getattr(kind, "__closure__", None) or ()]
        wrapped = [_type_name(c) for c in inner if callable(c)]
        if len(wrapped) == 1 and isinstance(wrapped[0], str):
            return wrapped[0]
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", None)
    if name is None:
        return {"repr": repr(kind)[:200]}
    return f"{module}.{name}" if module not in ("builtins", "") else name


def _negative(action: argparse.Action) -> list[str]:
    if not isinstance(action, argparse.BooleanOptionalAction):
        return []
    explicit = getattr(action, "negative_option_strings", None)
    if explicit is not None:
        return sorted(explicit)
    return sorted(o for o in action.option_strings if o.startswith("--no-"))


class _Refused(Exception):
    pass


def _probe(parser: argparse.ArgumentParser, tokens: list[str]) -> dict[str, Any]:
    """The ``dest`` each token selects as the parser reads an option (abbreviations
    included), ``"ambiguous"`` where it refuses it as such, None where it selects nothing."""

    def refuse(message: str) -> Any:
        raise _Refused(message)

    parser.error = refuse  # type: ignore[method-assign]
    out: dict[str, Any] = {}
    for token in tokens:
        try:
            found = parser._parse_optional(token)
        except _Refused as exc:
            out[token] = "ambiguous" if "ambiguous" in str(exc) else f"error: {exc}"
            continue
        # Python 3.12+ answers a list of candidates, 3.11 one tuple.
        if isinstance(found, list):
            found = found[0] if len(found) == 1 else None
        action = found[0] if found else None
        out[token] = None if action is None else action.dest
    return out


def describe(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every action of ``parser`` with what argparse does with it."""
    # Every token the parser looks an option up by: hidden spellings included (vLLM 0.33's
    # EnableDisableAction registers --disable-x beside --enable-x, and leaves it out of help).
    spellings: dict[int, list[str]] = {}
    for token, owner in parser._option_string_actions.items():
        spellings.setdefault(id(owner), []).append(token)
    actions = []
    for action in parser._actions:
        actions.append(
            {
                "option_strings": sorted(spellings.get(id(action), action.option_strings)),
                "dest": action.dest,
                "kind": type(action).__name__,
                "nargs": action.nargs,
                "const": _value(action.const),
                "default": "==SUPPRESS=="
                if action.default == argparse.SUPPRESS
                else _value(action.default),
                "type": _type_name(action.type),
                # A set of choices (SGLang's --sampling-backend) comes out sorted, not in
                # this run's hash order, so that a catalog built from it is the same each time.
                "choices": None if action.choices is None else _value(_choices(action.choices)),
                "required": bool(action.required),
                # The spellings that set the flag false (--no-x; vLLM 0.33: --disable-x too).
                "negative": _negative(action),
            }
        )
    return {
        "probes": _probe(parser, json.loads(os.environ.get("TIERCTL_PROBE") or "[]")),
        "prog": parser.prog,
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "actions": actions,
        "stubbed": sorted(STUBBED),
        "degraded": DEGRADED,
        "python": list(sys.version_info[:3]),
    }


def main(argv: list[str]) -> int:
    """``parser_dump.py sglang|vllm [ROOT]``: print the parser's JSON description."""
    mode = argv[0]
    root = argv[1] if len(argv) > 1 else None
    if mode == "vllm":
        # Which platform the parser is built for decides nothing about its flags, but vLLM
        # refuses to build its config classes where it finds none (a CUDA wheel's source on a
        # machine without a GPU); the CPU platform is the one that runs here.
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    _install(mode, root)
    parser = sglang_parser() if mode == "sglang" else vllm_parser()
    sys.stdout.flush()
    print(json.dumps(describe(parser)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
