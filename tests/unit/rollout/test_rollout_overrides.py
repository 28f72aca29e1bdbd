"""Base + override projects rolled out (#37): the drivers name every file of a side in
``-f`` order, the agent's target names the overrides, a side's files at two refs are refused
for compose-manager, and a fleet host's overrides reach its plan and its runbook."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.docker import DockerDriver
from tierctl.rollout.entrypoints import DriverConfig, make_driver
from tierctl.rollout.plan_schema import Plan, SourceRef


def _ref(spec: str) -> SourceRef:
    git = spec.split(":")[1] if spec.startswith("git:") else None
    path = spec.split(":")[-1]
    return SourceRef(spec=spec, path=path, sha256="0" * 64, git_ref=git)


def test_the_docker_driver_names_every_file_of_a_side_in_order(tmp_path: Path) -> None:
    base, over = _ref("git:v2:h/compose.yaml"), _ref("git:v2:h/override.yaml")
    dep = Deployment("new", base, "services: {}\n", {}, ((over, "services: {a: {}}\n"),))
    driver = DockerDriver(workdir=tmp_path, repo_root=tmp_path, compose=("docker", "compose"))
    argv = driver.base_argv(dep)
    files = [argv[i + 1] for i, a in enumerate(argv) if a == "-f"]
    assert [Path(f).name.split("-", 2)[-1] for f in files] == ["compose.yaml", "override.yaml"]
    assert Path(files[1]).read_text() == "services: {a: {}}\n"  # the override's own text
    assert argv[argv.index("--project-directory") + 1] == str(tmp_path / "h")


def _plan(source: list[str], target: list[str]) -> Plan:
    return Plan.model_construct(
        source=_ref(source[0]), target=_ref(target[0]),
        source_overrides=[_ref(s) for s in source[1:]],
        target_overrides=[_ref(s) for s in target[1:]], steps=[],
    )  # fmt: skip


def test_compose_manager_targets_name_the_overrides_and_refuse_two_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERCTL_AGENT_TOKEN", "tok")
    config = DriverConfig(name="compose-manager", agent_url="http://127.0.0.1:9")
    plan = _plan(["git:v1:h/c.yaml", "git:v1:h/o.yaml"], ["git:v2:h/c.yaml", "git:v2:h/o.yaml"])
    driver = make_driver(config, plan, tmp_path)
    assert driver._targets["new"].body() == {  # type: ignore[attr-defined]
        "tag": "v2", "file": "h/c.yaml", "overrides": ["h/o.yaml"],
    }  # fmt: skip
    mixed = _plan(["git:v1:h/c.yaml"], ["git:v2:h/c.yaml", "git:v3:h/o.yaml"])
    with pytest.raises(InputError, match="the new side's files are at different refs") as info:
        make_driver(config, mixed, tmp_path)
    assert info.value.location is not None
    assert info.value.location.file == "git:v3:h/o.yaml"
