"""The docker driver's exact commands, through an injected runner: no Docker engine runs here,
so these tests pin the argv and the parsing of compose's dry-run output, not Docker itself."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tierctl.errors import RuntimeFailure
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.docker import DockerDriver, RunResult
from tierctl.rollout.normalise import load_services
from tierctl.rollout.plan_schema import SourceRef

TEXT = """
services:
  r1: {image: a, container_name: model-r1, command: [python3, -m, sglang.launch_server, --port, "30001"]}
  r2: {image: a, container_name: model-r2, command: [python3, -m, sglang.launch_server, --port, "30002"]}
  proxy: {image: p}
"""


def _dep(git_ref: str | None = None) -> Deployment:
    ref = SourceRef(spec="x", path="deploy/tier.yaml", git_ref=git_ref, sha256="0" * 64)
    return Deployment("new", ref, TEXT, load_services(TEXT, "x").services)


class Recorder:
    def __init__(self, stdout: str = "", rc: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.stdout = stdout
        self.rc = rc

    def __call__(self, argv: Sequence[str]) -> RunResult:
        self.calls.append(list(argv))
        return RunResult(self.rc, self.stdout, "boom" if self.rc else "")


def test_apply_is_a_scoped_forced_up_without_dependencies(tmp_path: Path) -> None:
    run = Recorder()
    DockerDriver(tmp_path, runner=run).apply(_dep(), ["r2"])
    assert run.calls == [
        [
            "docker",
            "compose",
            "-f",
            "deploy/tier.yaml",
            "up",
            "-d",
            "--no-deps",
            "--force-recreate",
            "r2",
        ]
    ]


def test_dry_run_and_down_commands(tmp_path: Path) -> None:
    run = Recorder(
        " ✔ DRY-RUN MODE -  Container model-r2  Recreated\n ✔ DRY-RUN MODE -  Container model-r2  Started\n"
    )
    d = DockerDriver(tmp_path, project="tier", runner=run)
    result = d.dry_run(_dep(), ["r2"])
    d.down(_dep(), ["r1"])
    assert run.calls[0] == [
        "docker",
        "compose",
        "-f",
        "deploy/tier.yaml",
        "-p",
        "tier",
        "--dry-run",
        "up",
        "-d",
        "--no-deps",
        "--force-recreate",
        "r2",
    ]
    assert run.calls[1] == [
        "docker",
        "compose",
        "-f",
        "deploy/tier.yaml",
        "-p",
        "tier",
        "rm",
        "-s",
        "-f",
        "r1",
    ]
    assert result.changed == {"r2"}
    assert result.removed == frozenset()


def test_dry_run_that_touches_another_container_is_visible(tmp_path: Path) -> None:
    run = Recorder(
        "Container model-r2  Recreated\nContainer model-r1  Recreated\nContainer old-thing  Removed\n"
    )
    result = DockerDriver(tmp_path, runner=run).dry_run(_dep(), ["r2"])
    assert result.changed == {"r1", "r2"}
    assert result.removed == {"old-thing"}


def test_git_side_is_written_out_and_run_from_its_repository_directory(tmp_path: Path) -> None:
    run = Recorder()
    DockerDriver(tmp_path / "work", repo_root=tmp_path / "repo", runner=run).apply(
        _dep("v1"), ["r1"]
    )
    argv = run.calls[0]
    written = Path(argv[3])
    assert written.read_text() == TEXT
    assert written.parent == tmp_path / "work"
    assert argv[4:6] == ["--project-directory", str(tmp_path / "repo" / "deploy")]


def test_an_empty_service_list_is_never_sent(tmp_path: Path) -> None:
    run = Recorder()
    with pytest.raises(ValueError, match="empty means all"):
        DockerDriver(tmp_path, runner=run).apply(_dep(), [])
    assert run.calls == []


def test_a_failing_command_is_a_runtime_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeFailure, match="exited 1: boom"):
        DockerDriver(tmp_path, runner=Recorder(rc=1)).apply(_dep(), ["r1"])


def test_a_compose_without_dry_run_is_named(tmp_path: Path) -> None:
    def old_compose(argv: Sequence[str]) -> RunResult:
        return RunResult(1, "", "unknown flag: --dry-run")

    with pytest.raises(RuntimeFailure, match="no --dry-run") as info:
        DockerDriver(tmp_path, runner=old_compose).dry_run(_dep(), ["r2"])
    assert info.value.fix is not None
    assert "2.17" in info.value.fix


NO_PLUGIN = "unknown shorthand flag: 'f' in -f\nSee 'docker --help'.\n"


@pytest.mark.parametrize("call", ["dry_run", "apply", "down"])
def test_a_missing_compose_plugin_is_named_as_such(tmp_path: Path, call: str) -> None:
    def run(argv: Sequence[str]) -> RunResult:
        return RunResult(125, "", NO_PLUGIN)

    with pytest.raises(RuntimeFailure) as info:
        getattr(DockerDriver(tmp_path, runner=run), call)(_dep(), ["r2"])
    text = info.value.format()
    assert "docker has no compose plugin" in text
    assert "docker-compose-plugin" in text
    assert "--resume" not in text
    assert "unknown shorthand flag" not in info.value.message


@pytest.mark.skipif(
    __import__("shutil").which("docker") is None, reason="no docker CLI on this machine"
)
def test_the_real_docker_cli_without_the_plugin(tmp_path: Path) -> None:
    """Against the docker CLI installed here: it has no compose plugin (none is packaged)."""
    import subprocess

    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
    if probe.returncode == 0 and "compose" in probe.stdout.lower():
        pytest.skip("this docker has the compose plugin")
    with pytest.raises(RuntimeFailure, match="docker has no compose plugin"):
        DockerDriver(tmp_path).dry_run(_dep(), ["r2"])


def test_logs_of_one_service_for_the_gates(tmp_path: Path) -> None:
    run = Recorder(stdout="INFO non-default args: {'max_num_seqs': 512}\n")
    assert DockerDriver(tmp_path, runner=run).logs(_dep(), "r2") == (
        "INFO non-default args: {'max_num_seqs': 512}\n"
    )
    assert run.calls == [
        [
            "docker",
            "compose",
            "-f",
            "deploy/tier.yaml",
            "logs",
            "--no-color",
            "--no-log-prefix",
            "r2",
        ]
    ]
    assert DockerDriver(tmp_path, runner=Recorder(rc=1)).logs(_dep(), "r2") is None
