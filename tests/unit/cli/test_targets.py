"""The deployment-target registry (``tierctl.cli.targets``).

- every registered target has its modules (each step's module imports) and its adapter;
- ``validate --spec T C`` reads C (and T) from disk once, whatever target sniffing and the
  project's whole reading ask;
- a Nomad-sized target is four new modules and one line in the registry: a stub Nomad target
  (render, validate, runbook) is added to a copy of the package, the test asserts nothing else
  differs, and the copy's ``render --target nomad``, ``validate`` (auto-detected, and with the
  spec) and ``runbook --target nomad`` work, while ``plan`` and ``rollout --target nomad``
  (steps it does not register) are refused with exit 2 naming the steps it has;
- ``plan``, ``runbook``, ``rollout`` and ``kube plan`` go through the registry too.
"""

from __future__ import annotations

import filecmp
import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest

import tierctl
from tests.conftest import SMALL_SPEC, CliResult
from tierctl.cli import targets

SRC = Path(tierctl.__file__).parent


@pytest.mark.parametrize("name", targets.names())
def test_each_registered_target_has_its_modules(name: str) -> None:
    adapter = targets.target(name)
    assert adapter.name == name
    assert set(adapter.modules) <= set(targets.STEPS)
    assert {"render", "validate"} <= set(adapter.modules)
    for step, module in adapter.modules.items():
        assert importlib.import_module(module), (name, step)
    assert callable(adapter.claims)
    for step in adapter.modules:
        method = targets.STEP_METHODS.get(step)
        if method is not None:  # fleet is a mode of plan, runbook and rollout
            assert callable(getattr(adapter, method)), (name, step)


def test_the_default_target_is_what_no_other_claims(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  a:\n    image: x\n", encoding="utf-8")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", encoding="utf-8")
    assert targets.detect([compose]).name == targets.names()[0] == "compose"
    assert targets.detect([manifest]).name == "kubernetes"
    assert targets.detect([tmp_path]).name == "kubernetes"  # a directory of manifests
    assert targets.chosen("compose", [manifest]).name == "compose"  # --target wins


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path opened for reading through ``os.open`` or ``open`` (absolute)."""
    seen: list[str] = []
    real_os_open, real_open = os.open, open

    def os_open(path: object, flags: int, *args: object, **kw: object) -> int:
        if not flags & (os.O_WRONLY | os.O_RDWR):
            seen.append(os.path.abspath(os.fspath(path)))  # type: ignore[arg-type]
        return real_os_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    def py_open(file: object, mode: str = "r", *args: object, **kw: object) -> object:
        if isinstance(file, str | Path) and "r" in mode and "+" not in mode:
            seen.append(os.path.abspath(file))
        return real_open(file, mode, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr("builtins.open", py_open)
    return seen


def test_validate_with_a_spec_reads_each_input_once(
    run_cli: Callable[..., CliResult], tmp_path: Path, opened: list[str]
) -> None:
    spec = tmp_path / "tier.yaml"
    shutil.copy(SMALL_SPEC, spec)
    assert run_cli("render", "--write", str(spec)).code == 0
    compose = str(tmp_path / "compose.yaml")
    opened.clear()
    result = run_cli("validate", "--no-compose-binary", "--spec", str(spec), compose)
    assert result.code == 0, result.out + result.err
    assert opened.count(compose) == 1
    assert opened.count(str(spec)) == 1


def test_without_the_scope_the_same_validate_reads_again(
    run_cli: Callable[..., CliResult],
    tmp_path: Path,
    opened: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The count above is the scope's doing (mutation check: the scope made a no-op)."""
    import contextlib

    import tierctl.cli.validate as validate_cmd

    spec = tmp_path / "tier.yaml"
    shutil.copy(SMALL_SPEC, spec)
    assert run_cli("render", "--write", str(spec)).code == 0
    compose = str(tmp_path / "compose.yaml")
    monkeypatch.setattr(validate_cmd, "read_once", contextlib.nullcontext)
    opened.clear()
    assert run_cli("validate", "--no-compose-binary", "--spec", str(spec), compose).code == 0
    assert opened.count(compose) > 1


# --- a new target: the stub Nomad ---------------------------------------------------------

NOMAD_RENDER = '''\
"""Spec -> a Nomad job (JSON): one task group per replica running its argv (a stub)."""

import json

from tierctl.spec import resolve_tier
from tierctl.spec.tier_spec import TierSpec


def render_nomad(spec: TierSpec) -> str:
    """The job of ``spec``."""
    tier = resolve_tier(spec)
    groups = [
        {"Name": r.name, "Tasks": [{"Name": r.service, "Config": {"image": r.image, "args": r.argv}}]}
        for r in tier.replicas.values()
    ]
    return json.dumps({"Job": {"ID": spec.tier, "TaskGroups": groups}}, indent=2) + "\\n"
'''

NOMAD_CONTRACTS = '''\
"""A Nomad job checked against the spec: every replica's task runs the spec's argv (a stub)."""

from pathlib import Path

from tierctl.contracts.report import Report, Violation
from tierctl.readers import load_json, read_text
from tierctl.spec import load_spec, resolve_tier


def validate_job(path: Path, spec_path: Path | None) -> Report:
    """TC001 for each task whose args are not its replica's argv."""
    job = load_json(read_text(path, what="nomad job"), str(path))["Job"]
    tasks = {g["Name"]: g["Tasks"][0]["Config"]["args"] for g in job["TaskGroups"]}
    bad: list[Violation] = []
    if spec_path is not None:
        tier = resolve_tier(load_spec(spec_path))
        for name, replica in tier.replicas.items():
            if tasks.get(name) != replica.argv:
                bad.append(Violation("TC001", name, "the task's args are not the spec's argv"))
    return Report(str(spec_path), (str(path),), None, len(tasks), len(tasks), tuple(bad))
'''

NOMAD_RUNBOOK = '''\
"""The Nomad runbook between two specs: one ``nomad job run`` per task group that changes."""

from tierctl.spec import load_spec, resolve_tier


def nomad_runbook(old: str, new: str) -> str:
    """Markdown: the groups whose argv differ, canary first as the tier orders them."""
    before = resolve_tier(load_spec(old)).replicas
    after = resolve_tier(load_spec(new)).replicas
    moving = [n for n, r in after.items() if n not in before or before[n].argv != r.argv]
    lines = ["# Nomad rollout", ""] + [f"- nomad job run -check-index 0 {n}" for n in moving]
    return "\\n".join(lines or ["nothing changes"]) + "\\n"
'''

NOMAD_ADAPTER = '''\
"""The Nomad target (a stub): render and validate a job file, and its runbook."""

from pathlib import Path

from tierctl.cli.targets import Planned, Rendering


class NomadTarget:
    name = "nomad"
    modules = {
        "render": "tierctl.render.nomad",
        "validate": "tierctl.contracts.nomad",
        "runbook": "tierctl.rollout.nomad",
    }

    def claims(self, paths):
        return any(str(p).endswith(".nomad.json") for p in paths)

    def render(self, request):
        from tierctl.render.nomad import render_nomad

        path = request.output or request.spec_path.with_name(f"{request.spec.tier}.nomad.json")
        return Rendering(render_nomad(request.spec), path, (), " --target nomad")

    def validate(self, request):
        from tierctl.contracts.nomad import validate_job

        return validate_job(Path(request.paths[0]), request.spec_path)

    def runbook(self, request):
        from tierctl.rollout.nomad import nomad_runbook

        text = nomad_runbook(request.old[0], request.new[0])
        return Planned(text, lambda t: t.startswith("# Nomad rollout"))


TARGET = NomadTarget()
'''


def _changed(left: Path, right: Path, rel: str = "") -> set[str]:
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    out = {f"{rel}{n}" for n in (*cmp.left_only, *cmp.right_only, *cmp.diff_files)}
    for sub in cmp.common_dirs:
        out |= _changed(left / sub, right / sub, f"{rel}{sub}/")
    return out


@pytest.fixture(scope="module")
def with_nomad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nomad")
    pkg = root / "tierctl"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "render" / "nomad.py").write_text(NOMAD_RENDER, encoding="utf-8")
    (pkg / "contracts" / "nomad.py").write_text(NOMAD_CONTRACTS, encoding="utf-8")
    (pkg / "rollout" / "nomad.py").write_text(NOMAD_RUNBOOK, encoding="utf-8")
    (pkg / "cli" / "targets" / "nomad.py").write_text(NOMAD_ADAPTER, encoding="utf-8")
    registry = pkg / "cli" / "targets" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    entry = '    "kubernetes": "tierctl.cli.targets.kubernetes",\n'
    assert entry in text, "the registry moved: update this test with it"
    text = text.replace(entry, entry + '    "nomad": "tierctl.cli.targets.nomad",\n')
    registry.write_text(text, encoding="utf-8")
    return root


def _tierctl(root: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierctl", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_new_target_is_four_new_modules_and_one_registry_line(with_nomad: Path) -> None:
    assert _changed(SRC, with_nomad / "tierctl") == {
        "render/nomad.py",
        "contracts/nomad.py",
        "rollout/nomad.py",
        "cli/targets/nomad.py",
        "cli/targets/__init__.py",
    }


def test_the_commands_dispatch_to_the_new_target(with_nomad: Path, tmp_path: Path) -> None:
    spec = tmp_path / "tier.yaml"
    shutil.copy(SMALL_SPEC, spec)
    done = _tierctl(with_nomad, tmp_path, "render", "--target", "nomad", "--write", "tier.yaml")
    assert done.returncode == 0, done.stderr
    job = next(tmp_path.glob("*.nomad.json"))
    ok = _tierctl(with_nomad, tmp_path, "validate", "--spec", "tier.yaml", job.name)
    assert ok.returncode == 0, ok.stdout + ok.stderr  # auto: the Nomad target claimed it
    job.write_text(job.read_text().replace("--port", "--prot"), encoding="utf-8")
    bad = _tierctl(with_nomad, tmp_path, "validate", "--spec", "tier.yaml", job.name)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "TC001" in bad.stdout
    helped = _tierctl(with_nomad, tmp_path, "validate", "--help")
    assert "nomad" in helped.stdout


def test_the_rollout_commands_dispatch_to_the_new_target(with_nomad: Path, tmp_path: Path) -> None:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    shutil.copy(SMALL_SPEC, old)
    text = SMALL_SPEC.read_text(encoding="utf-8")
    assert "port: 30000\n" in text
    new.write_text(text.replace("port: 30000\n", "port: 30001\n"), encoding="utf-8")
    change = ("--from", "old.yaml", "--to", "new.yaml")
    done = _tierctl(with_nomad, tmp_path, "runbook", "--target", "nomad", *change)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Nomad rollout"), done.stdout
    runs = [x for x in done.stdout.splitlines() if x.startswith("- nomad job run")]
    assert [x.split()[-1] for x in runs] == ["r1", "r2"]  # both replicas' argv changed
    same = _tierctl(with_nomad, tmp_path, "runbook", "--target", "nomad", "--from", "old.yaml",
                    "--to", "old.yaml")  # fmt: skip
    assert "nomad job run" not in same.stdout
    written = _tierctl(with_nomad, tmp_path, "runbook", "--target", "nomad", *change, "-o", "r.md")
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "r.md").read_text().startswith("# Nomad rollout")
    for refused in (
        ("plan", "--target", "nomad", *change),
        ("rollout", "--target", "nomad", "--plan", "p.json", "--driver", "local"),
    ):
        out = _tierctl(with_nomad, tmp_path, *refused)
        assert out.returncode == 2, (refused, out.stdout, out.stderr)
        step = refused[0]
        assert f"the nomad target has no {step} step" in out.stderr
        assert "(render, validate, runbook)" in out.stderr
        assert "Traceback" not in out.stderr
    job = tmp_path / "x.nomad.json"
    job.write_text("{}", encoding="utf-8")
    imported = _tierctl(with_nomad, tmp_path, "import", job.name)  # auto: Nomad claims it
    assert imported.returncode == 2, imported.stdout + imported.stderr
    assert "the nomad target has no import step" in imported.stderr
    helped = _tierctl(with_nomad, tmp_path, "rollout", "--help")
    assert "nomad" in helped.stdout


def test_for_step_refuses_a_step_the_target_lacks() -> None:
    from tierctl.errors import InputError

    assert targets.for_step("compose", "rollout").name == "compose"
    assert targets.for_step("kubernetes", "runbook").name == "kubernetes"
    with pytest.raises(InputError) as info:
        targets.for_step("kubernetes", "rollout")
    assert "--target compose has it" in str(info.value)
    assert "runbook" in (info.value.fix or "")


@pytest.mark.parametrize("command", ["plan", "runbook", "rollout"])
def test_the_rollout_commands_take_every_registered_target(command: str) -> None:
    from tierctl.cli.main import cli

    sub = cli.get_command(click.Context(cli), command)
    assert sub is not None
    [option] = [p for p in sub.params if p.name == "target"]
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == targets.names()


def test_kube_plan_is_runbook_target_kubernetes(run_cli: Callable[..., CliResult]) -> None:
    spec = str(SMALL_SPEC)
    old = run_cli("kube", "plan", spec, spec)
    new = run_cli("runbook", "--target", "kubernetes", "--from", spec, "--to", spec)
    assert old.code == new.code == 0, old.err + new.err
    assert old.out == new.out
    assert old.out.startswith("# Kubernetes rollout of ")
    assert "kube plan is deprecated" in old.err
    assert "deprecated" not in new.err
    compose = run_cli("runbook", "--from", spec, "--to", spec, "--old-manifest", spec)
    assert compose.code == 2
    assert "the Kubernetes target's" in compose.err


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "--target", "kubernetes", "--from", "a.yaml", "--to", "b.yaml"),
        ("rollout", "--target", "kubernetes", "--plan", "p.json", "--driver", "local"),
        ("plan", "--target", "kubernetes", "--fleet", "fleet.yaml"),
    ],
)
def test_kubernetes_has_no_plan_or_rollout_step(
    run_cli: Callable[..., CliResult], args: tuple[str, ...]
) -> None:
    result = run_cli(*args)
    assert result.code == 2, result.out + result.err
    step = "fleet" if "--fleet" in args else args[0]
    assert f"the kubernetes target has no {step} step (--target compose has it)" in result.err
    assert "render, validate, import, runbook" in result.err


def test_no_command_compares_a_target_name_itself() -> None:
    """``if target == "kubernetes"`` (or ``in (...)``) outside ``cli/targets/``: the registry
    answers which target and whether it has the step (mutation check: the test finds one
    written into a copy of a command's source)."""
    import ast

    names = set(targets.names())

    def offenders(source: str, where: str) -> list[str]:
        found = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
                values += [e for v in values if isinstance(v, ast.Tuple | ast.List | ast.Set)
                           for e in v.elts]  # fmt: skip
                if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                    found.append(f"{where}:{node.lineno}")
        return found

    cli = SRC / "cli"
    bad = [
        hit
        for path in sorted(cli.rglob("*.py"))
        if "targets" not in path.relative_to(cli).parts
        for hit in offenders(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    ]
    assert bad == []
    assert offenders('if target == "kubernetes":\n    pass\n', "x") == ["x:1"]
    assert offenders('ok = name in ("compose", "other")\n', "y") == ["y:1"]
