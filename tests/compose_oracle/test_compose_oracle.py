"""The differential suite: tierctl's compose reading against the real Docker Compose v2.

Every compose project in the repository, every restated compose-go case, every kept
regression fixture and a generated corpus of 10,000 projects (Hypothesis, fixed seed) are
read by both; a project Compose accepts must read to the same name, services and top-level
resources, a project Compose refuses must be refused by tierctl with a located message, and
by ``tierctl validate --no-compose-binary`` too (but for an unset ``${VAR:?}``).
The binary comes from the ``compose`` extra (``make test`` installs it); the fixtures replay
without it (each keeps Compose's reading).

``COMPOSE_ORACLE_PROJECTS`` sets the generated corpus's size (default 10,000) and
``COMPOSE_ORACLE_SEED`` its seed (default 0; project ``gen-S-I`` is the same on every run,
:mod:`tests.compose_oracle.corpus`);
``scripts/compose_oracle.py`` runs the same comparison with counts and keeps new
disagreements as fixtures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.compose_oracle.corpus import run_generated
from tests.compose_oracle.harness import (
    VALIDATE_ACCEPTS,
    VALIDATE_OTHER,
    Case,
    compare,
    count,
    fixture_dirs,
    iter_repo_files,
    read_compose,
    read_tierctl,
    replay,
    run_cases,
)
from tests.compose_oracle.tables import table_cases
from tierctl.compose.binary import ComposeBinary

ROOT = Path(__file__).resolve().parents[2]
GENERATED = int(os.environ.get("COMPOSE_ORACLE_PROJECTS", "10000"))
#: The corpus's seed: 0 in CI (the same projects every run); another for fresh exploration.
SEED = int(os.environ.get("COMPOSE_ORACLE_SEED", "0"))


@pytest.fixture(scope="module")
def binary(compose_binary: ComposeBinary) -> ComposeBinary:
    return compose_binary


@pytest.mark.parametrize("files", list(iter_repo_files(ROOT)), ids=lambda fs: fs[0].name)
def test_repository_files_read_as_compose_reads_them(
    binary: ComposeBinary, files: list[Path]
) -> None:
    """Each compose file of the repository (examples, corpus, with its override)."""
    from tests.compose_oracle.projects import Project

    case = Case(files[0].name, Project(files={}, order=[f.name for f in files]))
    folder = files[0].parent
    mine = read_tierctl(files, folder, case)
    theirs = read_compose(binary, files, folder, [case])
    outcome = compare(case, mine, theirs, "")
    assert outcome.agree, (outcome.area, outcome.detail)


@pytest.mark.parametrize("case", table_cases(), ids=lambda c: c.name)
def test_compose_go_tables_read_as_compose_reads_them(binary: ComposeBinary, case: Case) -> None:
    """compose-go's test cases, as restated in tests/unit/compose, and the fuzzer's compose
    finds (``tables.HOSTILE``), against the binary."""
    [outcome] = run_cases(binary, [case], workers=1)
    assert outcome.agree, (outcome.area, outcome.detail)


def test_typed_values_read_as_compose_reads_them(binary: ComposeBinary) -> None:
    """Every path Compose casts a string at, and every numeric or boolean service key, with
    good, odd and bad values (tests/compose_oracle/typed.py): the same reading or refusal,
    but for the disagreements kept on purpose, which must still disagree."""
    from tests.compose_oracle.typed import KNOWN, known, typed_cases

    outcomes = run_cases(binary, typed_cases(), workers=2)
    bad = [o for o in outcomes if not o.agree and not known(o.case.name)]
    assert len(outcomes) > 800
    assert not bad, [(o.case.name, o.area, o.detail[:200]) for o in bad[:5]]
    kept = {p for p in KNOWN if any(o.case.name.startswith(p) and not o.agree for o in outcomes)}
    assert kept == set(KNOWN), "a kept disagreement is fixed: remove it from typed.KNOWN"


#: Kept disagreements not fixed (a deliberate difference, or not fixed yet), each with what
#: Compose does; strict, so a change makes the test fail until its line is removed.
OPEN: dict[str, str] = {
    # A deliberate difference (docs/compose.md), kept strict so that a change is noticed.
    "049": "deliberate: an override's `build: 5` over a long build is refused by tierctl "
    "(located, the compose-spec schema); Compose's merge keeps the earlier mapping and the "
    "merged project validates",
}


def _fixture_param(folder: Path) -> object:
    if folder.name in OPEN:
        return pytest.param(folder, marks=pytest.mark.xfail(reason=OPEN[folder.name], strict=True))
    return folder


@pytest.mark.parametrize(
    "folder", [_fixture_param(f) for f in fixture_dirs()], ids=lambda p: p.name
)
def test_kept_disagreements_stay_fixed(folder: Path) -> None:
    """Every disagreement ever found, replayed against the Compose reading it keeps."""
    outcome = replay(folder)
    assert outcome.agree, (outcome.area, outcome.detail)


#: Shapes every generated corpus must hold (issues #38, #42), at least this many projects
#: in 10,000 (a generator change that drops one fails here, not silently).
SHAPES = {
    "dotenv-generated": 1000,  # a service's env_file from the dotenv scanner's shapes
    "dotenv-project": 500,  # the project's .env, read by interpolation
    "env_file-raw": 300,  # env_file's format: raw
    "include": 1000,
    "include-redefined": 100,  # Compose refuses an included service redefined
    "include-empty": 100,
    "override-null": 500,  # `a: null` in an override
    "override-null-undefined": 100,
    "project-name-p": 500,
    "project-name-file": 500,
    "project-name-env": 200,
    "project-name-folder": 200,
    "profiles-env": 500,  # COMPOSE_PROFILES instead of --profile
    "volumes": 5000,
    "interpolation": 9000,
}


@pytest.mark.slow
def test_generated_projects_read_as_compose_reads_them(binary: ComposeBinary) -> None:
    """10,000 generated whole projects: 0 disagreements, both sides exercised, every shape
    drawn; and ``validate --no-compose-binary`` refuses every project Compose refuses but
    the documented unset ``${VAR:?}`` (issue #42)."""
    outcomes = run_generated(binary, GENERATED, seed=SEED, validate=True)
    counts = count(outcomes)
    bad = [o for o in outcomes if not o.agree]
    assert counts.projects >= GENERATED * 0.95
    assert counts.accepted_by_both > counts.projects // 3
    assert counts.refused_by_both > counts.projects // 20
    scale = GENERATED / 10000
    thin = {k: counts.features[k] for k, n in SHAPES.items() if counts.features[k] < n * scale}
    assert not thin, f"shapes drawn too rarely: {thin}"
    assert not bad, [(o.area, o.detail, o.case.project.render("")) for o in bad[:3]]
    missed = [o for o in outcomes if o.validate in (VALIDATE_ACCEPTS, VALIDATE_OTHER)]
    assert not missed, [(o.case.name, o.validate, o.refusal[:300]) for o in missed[:5]]


_EXTENSIONS = """\
x-common:
  environment: []
  nested: {deep: [], l: [[], {a: []}], s: x, m: {}}
x-list: []
x-scalar: 1
services:
  a:
    image: busybox
    x-own: {environment: [], b: [1]}
    deploy: {x-d: [], resources: {limits: {cpus: "1"}}}
    healthcheck: {test: ["CMD", "true"], x-h: 1}
    ports: [{target: 80, x-p: 1}]
    volumes: [{type: volume, source: v, target: /v, x-m: 1}]
volumes:
  v:
    x-vol: []
"""


def test_extensions_print_as_compose_prints_them(
    binary: ComposeBinary, run_cli, tmp_path: Path
) -> None:
    """x-* keys in ``config --format json``: top-level ones with empty lists as null, nested
    ones (a service's, a port's, a volume's) left out, exactly as the binary prints them."""
    import json

    from tierctl.compose.binary import compose_config

    path = tmp_path / "compose.yaml"
    path.write_text(_EXTENSIONS)
    theirs = compose_config([path], binary=binary, env={"PATH": "/usr/bin:/bin"})
    result = run_cli("compose", "config", str(path), "--format", "json")
    assert result.code == 0, result.err
    mine = json.loads(result.out)
    assert mine == theirs
    assert mine["x-common"]["environment"] is None
    assert "x-own" not in mine["services"]["a"]
