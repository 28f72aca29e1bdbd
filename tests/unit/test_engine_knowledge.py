"""Engine knowledge lives in the profiles (src/tierctl/engines/): the grep-style layer test.

docs/engines.md promises that a new engine is its profile module, one line in ``PROFILES`` and
its catalog. That holds only while no module outside ``engines/`` writes the engines down
itself. Read with ``ast`` (nothing is imported), every module outside ``engines/`` is checked
for:

- a list of engine kinds (a tuple, list, set, a dict's keys or a ``Literal[...]`` naming two
  or more kinds): kinds are ``tuple(PROFILES)`` or a registry's keys;
- a metric prefix (``vllm:``, ``sglang_``...) starting a string: the profile's
  ``metric_prefixes`` and ``selector`` write series names;
- one engine kind written as a string (``kind == "vllm"``, ``profile_for("sglang")``): only in
  the modules listed in :data:`ONE_ENGINE_MODULES`, each of which implements or models one
  particular engine, each with its reason; a module leaves the list when it stops.

The kinds and prefixes are read from ``PROFILES``, so a third engine is covered as soon as it
is registered.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tierctl
from tierctl.engines import PROFILES

SRC = Path(tierctl.__file__).parent
KINDS = frozenset(PROFILES)

#: Registries of per-engine implementations, keyed by kind (each key is tested to be a
#: profile's kind): the one place a kind may be written as a key outside engines/.
REGISTRIES = {
    "catalog/build.py": "EXTRACTORS: each engine's flag extractor (docs/engines.md step 3)",
    "realengine/registry.py": "REAL_ENGINES: the engines installable and runnable here",
}

#: Modules that implement or model one particular engine, so name it: why each may.
ONE_ENGINE_MODULES = {
    "catalog/parser_dump.py": "runs inside one engine's virtualenv, dumping its argparse",
    "catalog/build.py": "registers each engine's extractor",
    "realengine/registry.py": "the real engines' registry",
    "realengine/engine.py": "the real vLLM's process (its name)",
    "realengine/sglang.py": "the real SGLang's process (its name)",
    "sim/config.py": "the simulator's config models each engine's own flags",
    "sim/vllm_policy.py": "vLLM's scheduler model (its pool-in-blocks warning)",
    "sim/metrics.py": "the simulated /metrics of each engine",
    "sim/server.py": "the simulated server answers each engine's own endpoints",
    "sim/info.py": "the simulated /server_info, model card and start-up lines",
    "sim/accept_fit.py": "each engine's speculative-acceptance counters",
    "sim/disagg.py": "SGLang's prefill/decode disaggregation model",
    "sim/disagg_config.py": "each engine's KV-transfer configuration",
    "sim/host.py": "SGLang's dynamic batch tokenizer",
    "sim/surface.py": "the simulator's per-engine surfaces (its registry, SURFACES)",
    "demo/tier.py": "the bundled demo's story is an SGLang incident",
    "demo/ingestion.py": "the ingestion incident is SGLang's tokenizer manager",
    "fidelity.py": "the fidelity check is measured against the real vLLM on CPU",
    "kubernetes/containers.py": "KServe's default runtime (issue #41's reader of the shapes)",
}


def _modules() -> list[tuple[str, ast.AST]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("engines/"):
            continue
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"))))
    return out


MODULES = _modules()


def _kind(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KINDS:
        return node.value
    return None


def kind_lists(tree: ast.AST) -> list[int]:
    """Lines holding a collection literal that names two or more engine kinds."""
    lines = []
    for node in ast.walk(tree):
        items: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        if len({k for k in map(_kind, items) if k}) >= 2:
            lines.append(node.lineno)
    return lines


def _metric_like(text: str) -> bool:
    """A prefix with ``:`` starts only series names; a ``_`` spelling (``sglang_``) also
    starts module names (``sglang_router``), so there the rest must be one of the profile's
    families (``sglang_num_queue_reqs``)."""
    for profile in PROFILES.values():
        families = tuple(profile.families().values())
        for prefix in profile.metric_prefixes:
            if text.startswith(prefix) and (
                ":" in prefix or text[len(prefix) :].startswith(families)
            ):
                return True
    return False


def prefix_strings(tree: ast.AST) -> list[int]:
    """Lines with a string (or an f-string's text) starting with an engine's metric prefix."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _metric_like(node.value)
    ]


def one_kind_strings(tree: ast.AST) -> list[int]:
    """Lines where one engine kind is written as a string (outside docstrings)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if _kind(node) is not None and id(node) not in docstrings
    ]


def _hits(finder: object, allowed: dict[str, str] | None = None) -> list[str]:
    assert callable(finder)
    return [
        f"{rel}:{line}"
        for rel, tree in MODULES
        if allowed is None or rel not in allowed
        for line in finder(tree)
    ]


def test_no_module_outside_the_profiles_lists_engine_kinds() -> None:
    """Kind lists derive from ``PROFILES`` (``kinds()``, ``tuple(SURFACES)``...)."""
    assert _hits(kind_lists, REGISTRIES) == []


def test_no_module_outside_the_profiles_writes_a_metric_prefix() -> None:
    """Series names come from the profile (``metric_prefixes``, ``selector``, ``families``)."""
    assert _hits(prefix_strings) == []


def test_one_engine_is_named_only_where_one_engine_is_implemented() -> None:
    assert _hits(one_kind_strings, ONE_ENGINE_MODULES) == []


@pytest.mark.parametrize("module", sorted(ONE_ENGINE_MODULES))
def test_each_allowance_is_still_needed(module: str) -> None:
    """An allowance whose module no longer names an engine is dropped, so the list shrinks."""
    tree = dict(MODULES)[module]
    assert one_kind_strings(tree) or kind_lists(tree), f"{module} names no engine: unlist it"


def test_the_registries_are_keyed_by_profiled_kinds() -> None:
    from tierctl.catalog.build import EXTRACTORS
    from tierctl.realengine.registry import REAL_ENGINES
    from tierctl.sim.engine import POLICIES
    from tierctl.sim.surface import SURFACES

    for registry in (EXTRACTORS, REAL_ENGINES, POLICIES, SURFACES):
        assert set(registry) <= KINDS


@pytest.mark.parametrize(
    ("source", "finder"),
    [
        ('ENGINES = ("sglang", "vllm")', kind_lists),
        ('x: Literal["auto", "sglang", "vllm"]', kind_lists),
        ('T = {"sglang": 1, "vllm": 2}', kind_lists),
        ('click.Choice(["vllm", "sglang"])', kind_lists),
        ('q = "vllm:num_requests_running"', prefix_strings),
        ('q = f"sglang:{name}_bucket"', prefix_strings),
        ('q = "sglang_num_queue_reqs"', prefix_strings),
        ('if kind == "vllm": pass', one_kind_strings),
        ('p = profile_for("sglang")', one_kind_strings),
    ],
)
def test_the_scan_finds_each_leak(source: str, finder: object) -> None:
    """Mutation check: each shape the scan must refuse, written back, is found."""
    assert callable(finder)
    assert finder(ast.parse(source)) != []


def test_a_docstring_naming_an_engine_is_no_leak() -> None:
    assert one_kind_strings(ast.parse('def f():\n    """vllm"""\n')) == []
    assert prefix_strings(ast.parse('import x\nMOD = "sglang_router"')) == []
