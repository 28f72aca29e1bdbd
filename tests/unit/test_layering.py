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
    {
        "errors",
        "yaml12",
        "readers",
        "latency",
        "quantity",
        "tables",
        "bundled_tokenizer",
        "traces",
        "results",
        "engine_catalog",
        "credentials",
        "paths",
        "bounded_schema",
        "release",
        "netnames",
    }
)
#: The lifecycle steps that talk to servers; none of them imports another.
STEPS = frozenset({"sim", "bench", "rollout", "readout"})
#: Where output is drawn and the event loop is owned.
UI = frozenset({"cli", "demo", "realtier", "progress", "__main__"})

#: docs/architecture.md's layers, lowest first: a package imports only its own layer and the
#: layers below it. Every package of src/tierctl/ is in exactly one (tested), so a new one is
#: placed on purpose. Within a layer, the no-cycle test and the rules below still hold.
LAYERS: tuple[frozenset[str], ...] = (
    LEAVES,
    frozenset({"runtime"}),  # process manager, wait_until, the Prometheus parser and client
    frozenset({"compose"}),
    frozenset({"engines"}),
    frozenset({"kubernetes"}),  # manifests read, their schemas and engine containers
    frozenset({"catalog"}),
    frozenset({"realengine", "proxies"}),
    frozenset({"spec"}),
    frozenset({"render"}),
    frozenset({"contracts"}),
    frozenset({"adopt"}),  # import of compose files and of Kubernetes manifests
    STEPS,
    frozenset({"agent"}),  # serves rollout's API on a host: its requests, dry-run reading
    frozenset({"testhosts"}),  # simulated hosts: namespaces, their dockerds and agents
    frozenset({"fidelity", "whatif"}),  # measure with bench, predict with sim; judge what-ifs
    frozenset({"progress"}),
    frozenset({"demo", "realtier"}),
    frozenset({"cli"}),
    frozenset({"__main__"}),
)
#: The package root re-exports the API; it is above everything and nothing imports it.
ROOT = "__init__"


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


def _packages() -> frozenset[str]:
    return frozenset(
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    )


def _rank(package: str) -> int:
    return next(k for k, layer in enumerate(LAYERS) if package in layer)


def _upward(imports: list[Import]) -> list[str]:
    """Imports of a package from a higher layer than its own (the root aside)."""
    return [
        f"{i.where}: {i.target}"
        for i in imports
        if i.package != ROOT
        and (target := _tierctl_package(i.target))
        and target != i.package
        and _rank(target) > _rank(i.package)
    ]


def _cycles(imports: list[Import]) -> list[list[str]]:
    """The package import graph's strongly connected components of more than one package."""
    edges: dict[str, set[str]] = {}
    for i in imports:
        target = _tierctl_package(i.target)
        if target and target != i.package:
            edges.setdefault(i.package, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graph has some 25 nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_house_has_no_package_cycle() -> None:
    """Packages form a DAG: a cycle is two packages that can be neither read nor tested apart."""
    assert _cycles(IMPORTS) == []


def test_every_package_has_a_layer() -> None:
    placed = [p for layer in LAYERS for p in layer]
    assert len(placed) == len(set(placed)), "a package is in two layers"
    assert sorted(_packages() - set(placed) - {ROOT}) == []


def test_no_package_imports_a_higher_layer() -> None:
    assert _upward(IMPORTS) == []


#: The edges that closed the package cycles this layering removed (issue #20): each cycle's
#: way back up. The rules above must refuse every one of them.
OLD_CYCLE_EDGES = [
    # {proxies, realengine} and {rollout, readout, realengine, proxies}: realengine/ held the
    # orchestration (tier, demo) beside the process manager everyone used.
    ("realengine", "tierctl.proxies.sglang_router"),
    ("realengine", "tierctl.rollout.executor"),
    ("realengine", "tierctl.readout.local_prom"),
    ("realengine", "tierctl.render"),
    # {spec, render, contracts}: spec/adopt.py imported contracts and render.
    ("spec", "tierctl.contracts.hygiene"),
    ("spec", "tierctl.render"),
    # catalog <-> engines: the engines' catalog types lived in catalog/, which imported engines.
    ("engines", "tierctl.catalog.engine_catalog"),
    ("compose", "tierctl.catalog.engine_catalog"),
    # cli <-> demo: the demo drew bench bars from cli/progress.py.
    ("demo", "tierctl.cli.progress"),
]


@pytest.mark.parametrize(("package", "target"), OLD_CYCLE_EDGES)
def test_each_old_cycle_is_refused(package: str, target: str) -> None:
    """Put an old cycle's edge back (as the scanner would read it): the rules refuse it."""
    edge = Import(package, f"{package}/x.py:1", target, ())
    refused_by_layers = _upward([edge]) != []
    closes_a_cycle = _cycles([*IMPORTS, edge]) != []
    assert refused_by_layers or closes_a_cycle


def test_runtime_imports_only_the_leaves() -> None:
    """The shared plumbing (processes, polling, Prometheus) sits under every step."""
    assert _offenders(frozenset({"runtime"}), _packages() - LEAVES - {"runtime"}) == []


def test_the_real_engine_imports_no_step_and_no_proxy() -> None:
    """realengine/ is one engine and its environment; the tier that drives the steps with it
    is realtier/, above them."""
    above = STEPS | {"proxies", "spec", "render", "contracts", "realtier", "demo", "cli"}
    assert _offenders(frozenset({"realengine"}), frozenset(above)) == []


def test_the_spec_imports_neither_render_nor_contracts() -> None:
    """``import``'s round trip (:mod:`tierctl.adopt`) uses contracts and render from above."""
    assert _offenders(frozenset({"spec"}), frozenset({"render", "contracts", "adopt"})) == []


def test_engines_and_compose_see_only_the_catalog_types() -> None:
    """engines/ and compose/ use the catalog's types (the leaf :mod:`tierctl.engine_catalog`),
    never the catalog package, which builds and ships catalogs using the profiles."""
    assert _offenders(frozenset({"engines", "compose"}), frozenset({"catalog"})) == []


def test_the_catalog_imports_nothing_lazily_from_the_engines() -> None:
    """The four lazy imports that hid catalog <-> engines stay gone: catalog/ imports the
    profiles at the top, where a cycle would show at once."""
    lazy = []
    for path in [*sorted((SRC / "catalog").rglob("*.py")), SRC / "engine_catalog.py"]:
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                        "tierctl.engines"
                    ):
                        lazy.append(f"{path.name}:{node.lineno}")
    assert lazy == []


def test_the_demo_does_not_import_the_cli() -> None:
    assert _offenders(frozenset({"demo", "realtier", "progress"}), frozenset({"cli"})) == []


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


#: What would make the fidelity measurement a second load client: an HTTP client, or the
#: load client's wire-level parts (SSE decoding, the lean HTTP/1.1 path) used directly.
OWN_CLIENT_ROOTS = frozenset({"aiohttp", "httpx", "requests", "urllib3", "http", "socket"})
OWN_CLIENT_MODULES = frozenset({"urllib.request", "tierctl.bench.sse", "tierctl.bench.http1"})


def _own_client(imports: list[Import]) -> list[str]:
    """Imports by which ``fidelity`` would send or read requests itself."""
    return [
        f"{i.where}: {i.target}"
        for i in imports
        if i.package == "fidelity"
        and (i.target.split(".")[0] in OWN_CLIENT_ROOTS or i.target in OWN_CLIENT_MODULES)
    ]


def test_fidelity_sits_above_sim_and_bench_and_measures_with_the_load_client() -> None:
    """The fidelity check joins the two steps from above: it predicts with the simulator and
    measures with bench's client (``send_request``), never with an HTTP client of its own;
    neither step, nor anything below them, imports it."""
    assert _rank("fidelity") > max(_rank("sim"), _rank("bench"))
    joined = {_tierctl_package(i.target) for i in IMPORTS if i.package == "fidelity"}
    assert {"sim", "bench"} <= joined
    below = frozenset(p for layer in LAYERS[: _rank("fidelity")] for p in layer)
    assert _offenders(below, frozenset({"fidelity"})) == []
    assert _own_client(IMPORTS) == []
    assert any(
        i.package == "fidelity" and i.target == "tierctl.bench.client" and "send_request" in i.names
        for i in IMPORTS
    )


#: The shapes the fidelity measurement had before it sat above both steps on bench's client
#: (issue #20): inside sim/ (imported from sim), with its own aiohttp session, then with
#: bench's SSE decoder but its own session.
OLD_FIDELITY_EDGES = [
    ("sim", "tierctl.fidelity"),
    ("bench", "tierctl.fidelity"),
    ("fidelity", "aiohttp"),
    ("fidelity", "tierctl.bench.sse"),
]


@pytest.mark.parametrize(("package", "target"), OLD_FIDELITY_EDGES)
def test_each_old_fidelity_shape_is_refused(package: str, target: str) -> None:
    edge = Import(package, f"{package}/x.py:1", target, ())
    assert _upward([edge]) != [] or _own_client([edge]) != []


def test_compose_reading_never_imports_the_spec() -> None:
    """compose/ reads any compose file; the tier spec builds on it, never the reverse."""
    assert _offenders(frozenset({"compose"}), frozenset({"spec", "render", "contracts"})) == []


def test_compose_reading_knows_no_engine() -> None:
    """engines/ reads argv with compose/'s parser; an engine-aware comparison of compose files
    (the import's round trip: ``spec.semantic_diff``) lives above both."""
    assert _offenders(frozenset({"compose"}), frozenset({"engines"})) == []


def test_engine_profiles_import_no_lifecycle_step() -> None:
    """engines/ is the one place an engine is known; steps ask it, it asks none of them."""
    above = STEPS | {"spec", "render", "contracts", "adopt", "cli", "demo", "realtier"}
    assert _offenders(frozenset({"engines"}), frozenset(above)) == []


def test_leaves_import_only_leaves() -> None:
    everything = _packages() - {ROOT}
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


def _private_imports(imports: list[Import]) -> list[str]:
    """``from tierctl.X import _name`` by a module outside X's package (or ``X._mod``)."""
    return [
        f"{i.where}: {i.target}: {', '.join(n for n in i.names if n.startswith('_')) or '(module)'}"
        for i in imports
        if (target := _tierctl_package(i.target))
        and target != i.package
        and (any(n.startswith("_") for n in i.names) or i.target.split(".")[-1].startswith("_"))
    ]


def test_no_package_imports_another_packages_private_name() -> None:
    """A name with a leading underscore is its package's own: a second package using it (as
    kube/ used four of compose's, adopt's and render's) is coupling nobody can see from the
    owner. The owner makes it public, or the concept moves below both."""
    assert _private_imports(IMPORTS) == []


def test_the_private_name_rule_refuses_the_old_imports() -> None:
    old = [
        Import("kube", "kube/importing.py:25", "tierctl.adopt", ("_common", "_overrides")),
        Import("agent", "agent/server.py:60", "tierctl.runtime.process", ("_die_with_parent",)),
        # after the Kubernetes move the import's four names from the checks are another
        # package's: contracts.kubernetes made them public
        Import("adopt", "adopt/kubernetes.py:45", "tierctl.contracts.kubernetes", ("_Findings",)),
    ]
    assert len(_private_imports(old)) == 3
    same_package = Import(
        "adopt", "adopt/kubernetes.py:31", "tierctl.adopt.kubernetes_checks", ("_catalog",)
    )
    assert _private_imports([same_package]) == []
