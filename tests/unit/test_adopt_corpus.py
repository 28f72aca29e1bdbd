"""The adopt corpus: real-world-shaped compose projects, each adopted with no edit.

Each folder of ``tests/fixtures/adopt_corpus`` is one project (``compose.yml``, then its
``compose.*.yml`` overrides in name order) with a ``PROVENANCE.md`` that says what public
deployment it is shaped after, which rows of the import table it covers, the import options
it needs, and the violations ``validate`` must report on it (real problems of the file, or
``none``). For every project:

- ``import`` takes it as it is (into a spec in *another* folder, so relative paths are
  rebased) and its own round trip finds no difference;
- the real Compose reads the rendering to the same ``config --format json`` as the input,
  once :data:`tierctl.adopt.RENDER_ADDITIONS` are taken out; each credential the import
  turned into a reference is set, for the rendered side only, to the value the input had;
- ``validate`` (without a spec) reports exactly the expected violations, and the rendering
  validates against the imported spec wherever a catalog of its release is shipped;
- ``plan`` of the project against the rendering (beside it) changes nothing but what the
  rendering adds and the credentials the import turned into references;
- a project that runs no SGLang or vLLM engine (``Import refused: ENGINE``: TGI, llama.cpp,
  Ollama, TensorRT-LLM) is refused cleanly, the refusal naming the engine.

The real Compose reads the command's tokens in order, so "the same config" is argv token for
token, in order.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tierctl.adopt import Adoption, adopt, without_render_additions
from tierctl.catalog.store import shipped
from tierctl.compose import parse_compose
from tierctl.compose.binary import ComposeBinary, compose_config
from tierctl.contracts.standalone import validate_files
from tierctl.contracts.validation import validate
from tierctl.errors import InputError

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "adopt_corpus"
#: The rows of the import table (issue #23) a project may cover (PROVENANCE ``Rows:``).
ROWS = ("tag", "gpu", "container_name", "secret", "engine")
_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root"}


@dataclass(frozen=True)
class Project:
    """One corpus project and what its PROVENANCE note says about it."""

    name: str
    files: list[Path]
    rows: tuple[str, ...]
    options: dict[str, Any]
    expected: set[tuple[str, str]]  # (rule, service) validate must report
    refused: str = ""  # the engine a clean refusal names (no SGLang or vLLM engine runs)


def _field(text: str, name: str) -> str:
    m = re.search(rf"^{name}:[ \t]*(.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else ""


def _project(folder: Path) -> Project:
    note = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    files = [folder / "compose.yml", *sorted(folder.glob("compose.*.yml"))]
    options: dict[str, Any] = {}
    for item in _field(note, "Import options").split():
        if item == "none":
            continue
        key, _, value = item.partition("=")
        options[key] = [value] if key == "engine_services" else value
    expected_text = _field(note, "Expected violations")
    expected = set()
    if expected_text != "none":
        for item in expected_text.split(";"):
            rule, service = item.split()[:2]
            expected.add((rule, service))
    rows = tuple(r.strip() for r in _field(note, "Rows").split(",") if r.strip())
    refused = _field(note, "Import refused")
    return Project(folder.name, files, rows, options, expected, refused)


PROJECTS = [_project(p) for p in sorted(CORPUS.iterdir()) if p.is_dir()]
IDS = [p.name for p in PROJECTS]


def test_the_corpus_has_eighty_projects_covering_every_row() -> None:
    assert len(PROJECTS) >= 80
    for project in PROJECTS:
        assert _field((CORPUS / project.name / "PROVENANCE.md").read_text(), "Shaped after")
        assert set(project.rows) <= set(ROWS), project.name
    for row in ROWS:
        assert sum(row in p.rows for p in PROJECTS) >= 3, row


def _profiles(config: dict[str, Any]) -> list[str]:
    return sorted({p for s in config.get("services", {}).values() for p in s.get("profiles", [])})


def _refused_cleanly(project: Project, out: Path) -> None:
    """A project that runs no SGLang or vLLM engine: the import refuses, naming the engine
    it saw, located, with a fix."""
    with pytest.raises(InputError) as info:
        adopt(project.files, out=out, **project.options)
    assert project.refused in info.value.message, info.value.format()
    assert info.value.location is not None
    assert info.value.fix


def _imported(project: Project, tmp_path: Path) -> tuple[Adoption, Path]:
    out = tmp_path / "spec" / "tier.yaml"
    result = adopt(project.files, out=out, **project.options)
    assert result.differences == [], result.differences
    rendered = out.parent / result.spec.output
    out.parent.mkdir(parents=True, exist_ok=True)
    rendered.write_text(result.rendered, encoding="utf-8")
    return result, rendered


def _secret_env(result: Adoption, original: dict[str, Any]) -> dict[str, str]:
    """Each reference the import wrote, set to the value the input had (test-side only)."""
    env: dict[str, str] = {}
    for ref in result.references:
        service = original["services"][ref.service]
        kind, _, key = ref.where.partition(" ")
        if kind == "environment":
            env[ref.var] = service["environment"][key]
        else:
            token = service["command"][int(key.split()[-1])]
            env[ref.var] = token.split("=", 1)[1] if token.startswith("--") else token
    return env


@pytest.mark.parametrize("project", PROJECTS, ids=IDS)
def test_rendering_reads_to_the_same_compose_config(
    project: Project, tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    first = compose_config(project.files, binary=compose_binary, env=_ENV)
    profiles = _profiles(first)
    first = compose_config(project.files, binary=compose_binary, env=_ENV, profiles=profiles)
    if project.refused:
        _refused_cleanly(project, tmp_path / "spec" / "tier.yaml")
        return
    result, rendered = _imported(project, tmp_path)
    secrets = _secret_env(result, first)
    # The credentials are nowhere in what the import wrote.
    for value in secrets.values():
        assert value not in result.text
        assert value not in result.rendered
        assert all(value not in n for n in result.notes)
    # Both sides read with the variables the import says to set, set to the file's values
    # (a literal reads the same either way; a ${X:-default} too, X being the default).
    env = {**_ENV, **secrets}
    original = compose_config(project.files, binary=compose_binary, env=env, profiles=profiles)
    again = compose_config([rendered], binary=compose_binary, env=env, profiles=profiles)
    replicas = [r.service for r in _resolved(result)]
    theirs = without_render_additions(again, original, replicas)
    assert json.dumps(theirs, sort_keys=True, indent=1) == json.dumps(
        original, sort_keys=True, indent=1
    )


def _resolved(result: Adoption) -> list[Any]:
    from tierctl.spec.effective import resolve_tier

    return list(resolve_tier(result.spec).replicas.values())


@pytest.mark.parametrize("project", PROJECTS, ids=IDS)
def test_validate_reports_only_the_real_problems(project: Project, tmp_path: Path) -> None:
    engine = project.options.get("engine")
    report = validate_files(project.files, engine=engine)
    found = {(v.rule, v.service) for v in report.violations}
    assert found == project.expected, report.text()
    if project.refused:
        return
    result, rendered = _imported(project, tmp_path)
    spec = result.spec
    if (spec.engine.kind, spec.engine.version) in shipped():
        checked = validate(spec, [parse_compose(result.rendered, source=str(rendered))])
        assert {(v.rule, v.service) for v in checked.violations} <= project.expected, checked.text()


@pytest.mark.parametrize("project", PROJECTS, ids=IDS)
def test_plan_of_the_import_against_the_original_changes_nothing(
    project: Project, tmp_path: Path
) -> None:
    """The spec beside the project, its rendering beside both: ``plan`` OLD (the project)
    NEW (the rendering) changes nothing but :data:`tierctl.adopt.RENDER_ADDITIONS` (tierctl's
    labels, the log driver) and the credentials the import turned into references."""
    import shutil

    from tierctl.rollout.planner import PlanOptions, plan_files

    if project.refused:
        pytest.skip(f"no SGLang or vLLM engine ({project.refused}): the import refuses")
    here = tmp_path / project.name
    shutil.copytree(CORPUS / project.name, here)
    files = [here / f.name for f in project.files]
    result = adopt(files, out=here / "tier.yaml", **project.options)
    rendered = here / result.spec.output
    rendered.write_text(result.rendered, encoding="utf-8")
    moved = {f"env {r.where.split()[1]}: changed" for r in result.references}
    variables = {r.var for r in result.references if r.where.startswith("command")}
    plan = plan_files([str(f) for f in files], [str(rendered)], PlanOptions())
    for change in plan.services:
        left = [
            d
            for d in change.details
            if not d.startswith(("label tierctl.", "logging"))
            and d not in moved
            and not any(f"${{{v}:?" in d for v in variables)
        ]
        assert left == [], (change.service, change.details)
