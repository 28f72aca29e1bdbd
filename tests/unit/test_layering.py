"""The package layering of docs/architecture.md, enforced by reading every module's imports.

Each rule names the direction that must never appear; a failure lists the offending
``module:line``. Imports are read with ``ast`` (nothing is imported), including those inside
functions, so a lazy import counts too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import tierctl

SRC = Path(tierctl.__file__).parent

#: Modules every layer may use: they import nothing of tierctl but each other.
LEAVES = frozenset(
    {"errors", "yaml12", "readers", "latency", "quantity", "tables", "bundled_tokenizer", "traces"}
)
#: The lifecycle steps that talk to servers; none of them imports another.
STEPS = frozenset({"sim", "bench", "rollout", "readout"})
#: Where output is drawn and the event loop is owned.
UI = frozenset({"cli", "demo", "__main__"})


@dataclass(frozen=True)
class Import:
    package: str  # first component under tierctl/ of the importing module ("bench", "errors")
    where: str  # "bench/ab.py:23"
    target: str  # dotted module imported ("tierctl.sim.tokenizer", "rich.progress")
    names: tuple[str, ...]  # for ``from X import a, b``: the names


def _imports() -> list[Import]:
    out: list[Import] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{rel.as_posix()}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                out += [Import(package, where, a.name, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = tuple(a.name for a in node.names)
                out.append(Import(package, where, node.module, names))
    return out


IMPORTS = _imports()


def _tierctl_package(target: str) -> str | None:
    """``tierctl.sim.engine`` -> ``sim``; ``tierctl`` -> ``""``; not tierctl -> None."""
    if target == "tierctl":
        return ""
    if target.startswith("tierctl."):
        return target.split(".")[1]
    return None


def _offenders(importer: frozenset[str] | None, imported: frozenset[str]) -> list[str]:
    return [
        f"{i.where}: {i.target}"
        for i in IMPORTS
        if (importer is None or i.package in importer)
        and _tierctl_package(i.target) in imported
        and _tierctl_package(i.target) != i.package
    ]


def test_the_scan_sees_the_known_imports() -> None:
    # guard against a scanner that finds nothing and so passes every rule
    assert any(i.where.startswith("bench/") and i.target == "tierctl.latency" for i in IMPORTS)
    assert any(i.package == "cli" and _tierctl_package(i.target) == "bench" for i in IMPORTS)


def test_the_load_client_never_imports_the_simulator() -> None:
    assert _offenders(frozenset({"bench"}), frozenset({"sim"})) == []


def test_the_simulator_never_imports_the_load_client() -> None:
    assert _offenders(frozenset({"sim"}), frozenset({"bench"})) == []


def test_lifecycle_steps_do_not_import_each_other() -> None:
    """A concept two steps share lives below them (the soak gate and the bench's health lane
    both ask :mod:`tierctl.engines.liveness`)."""
    crossings = [o for step in STEPS for o in _offenders(frozenset({step}), STEPS - {step})]
    assert crossings == []


def test_compose_reading_never_imports_the_spec() -> None:
    """compose/ reads any compose file; the tier spec builds on it, never the reverse."""
    assert _offenders(frozenset({"compose"}), frozenset({"spec", "render", "contracts"})) == []


def test_compose_reading_knows_no_engine() -> None:
    """engines/ reads argv with compose/'s parser; an engine-aware comparison of compose files
    (the import's round trip: ``spec.semantic_diff``) lives above both."""
    assert _offenders(frozenset({"compose"}), frozenset({"engines"})) == []


def test_engine_profiles_import_no_lifecycle_step() -> None:
    """engines/ is the one place an engine is known; steps ask it, it asks none of them."""
    above = STEPS | {"spec", "render", "contracts", "cli", "demo"}
    assert _offenders(frozenset({"engines"}), frozenset(above)) == []


def test_leaves_import_only_leaves() -> None:
    everything = frozenset(
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
        and p.stem != "__init__"
    )
    assert _offenders(LEAVES, everything - LEAVES) == []


def test_no_module_imports_the_package_root() -> None:
    """``import tierctl`` inside the package is a cycle: the root imports the subpackages."""
    assert [f"{i.where}: {i.target}" for i in IMPORTS if i.target == "tierctl"] == []


def test_only_the_cli_and_the_demo_import_the_cli() -> None:
    library = frozenset({i.package for i in IMPORTS}) - UI
    assert _offenders(library, frozenset({"cli"})) == []


@pytest.mark.parametrize(
    ("module", "what"),
    [("click", "command-line parsing"), ("rich.progress", "progress bars")],
)
def test_the_library_draws_no_ui(module: str, what: str) -> None:
    hits = [
        f"{i.where}: {i.target}"
        for i in IMPORTS
        if i.package not in UI and (i.target == module or i.target.startswith(module + "."))
    ]
    assert hits == [], f"{what} belongs in tierctl.cli"


def test_the_library_leaves_the_event_loop_to_its_caller() -> None:
    """No ``asyncio.run`` outside the CLI and the demo: a library coroutine is awaited."""
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in UI or rel.stem in UI:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "asyncio.run":
                hits.append(f"{rel.as_posix()}:{node.lineno}")
    assert hits == []


#: Module names that say nothing about what they hold; each had a collision (four ``model.py``).
GENERIC_NAMES = frozenset({"model", "models", "core", "utils", "util", "helpers", "common", "misc"})


def test_no_module_has_a_generic_name() -> None:
    """A module is named for its concept, so ``grep`` and a newcomer find the one place."""
    generic = sorted(
        p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if p.stem in GENERIC_NAMES
    )
    assert generic == []


def test_no_two_library_classes_share_a_name() -> None:
    """A class name is one concept: two ``Workload``, ``Plan`` or ``Summary`` classes had to be
    told apart by their module in every reader's head (and in every import)."""
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(f"{rel}:{node.lineno}")
    assert {name: at for name, at in where.items() if len(at) > 1} == {}
