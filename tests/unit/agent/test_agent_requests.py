"""The agent's request checks, its project names, its operation log, and the reading of a dry
run that Compose stopped at its copy of inline configs (the lines are Compose 2.40.3's own,
recorded on a real dockerd by tests/integration/test_agent_docker*.py)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.agent.oplog import OperationLog, read_log
from tierctl.agent.projects import AgentRefusal, project_name
from tierctl.agent.protocol import check_env, compose_argv, down_call, logs_target, up_call
from tierctl.rollout.drivers.compose_manager import Target, down_request, up_request
from tierctl.rollout.dryrun import parse_dry_run, stopped_at_config_copy

TARGET = Target("v2", "gpu02/tier.yaml")


def test_the_driver_s_bodies_are_what_the_agent_accepts() -> None:
    """The contract both sides share: every body the driver builds parses, unchanged."""
    _, body = up_request(TARGET, ["r2"], {"HF_TOKEN": "x"}, force_recreate=False, dry_run=True)
    call = up_call(body)
    assert (call.operation, call.tag, call.file, call.services) == (
        "up",
        "v2",
        "gpu02/tier.yaml",
        ("r2",),
    )
    assert (call.dry_run, call.force_recreate, call.env) == (True, False, {"HF_TOKEN": "x"})
    _, body = down_request(TARGET, ["r2", "r1"], {})
    assert down_call(body).services == ("r2", "r1")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"services": []}, "every service"),
        ({"services": ["--all"]}, "not a compose service name"),
        ({"services": "r2"}, "list of service names"),
        ({"dry_run": "yes"}, "true or false"),
        ({"env": {"LD_PRELOAD": "/x.so"}}, "the agent's own"),
        ({"env": {"PATH": "/tmp"}}, "the agent's own"),
        ({"env": {"COMPOSE_FILE": "/etc/x"}}, "the agent's own"),
        ({"env": {"TOKEN_VAR": "x"}}, "the agent's own"),
        ({"env": {"A-B": "x"}}, "invalid env keys"),
        ({"env": {"A": "x\x00y"}}, "NUL"),
        ({"extra": True}, "keys must be"),
    ],
)
def test_a_bad_body_is_refused_with_400(change: dict[str, object], said: str) -> None:
    _, body = up_request(TARGET, ["r2"], {}, force_recreate=False, dry_run=True)
    with pytest.raises(AgentRefusal, match=said) as info:
        up_call({**body, **change}, frozenset({"TOKEN_VAR"}))
    assert info.value.status == 400


def test_an_env_value_is_never_shown_in_a_refusal() -> None:
    with pytest.raises(AgentRefusal) as info:
        check_env({"HF_TOKEN": "hf-SECRET\x00"})
    assert "hf-SECRET" not in info.value.message


def test_logs_bounds_its_tail() -> None:
    base = {"tag": "v1", "file": "f.yaml", "service": "r2"}
    assert logs_target({**base, "tail": 50}) == ("v1", "f.yaml", "r2", 50)
    for tail in (0, 10_001, True, "5"):
        with pytest.raises(AgentRefusal, match="`tail`"):
            logs_target({**base, "tail": tail})


def test_compose_argv_puts_the_services_after_a_double_dash() -> None:
    _, body = down_request(TARGET, ["r2"], {})
    argv = compose_argv(("docker", "compose"), "p", "/c/f.yaml", "/c", down_call(body))
    assert argv[-2:] == ["--", "r2"]
    assert argv[argv.index("rm") :] == ["rm", "-s", "-f", "--", "r2"]


@given(st.text(alphabet="abcXYZ019_-. /", min_size=1, max_size=20))
def test_a_project_name_is_always_one_compose_accepts_or_refused(folder: str) -> None:
    try:
        name = project_name("services: {}\n", PurePosixPath(folder) / "f.yaml", "root")
    except AgentRefusal:
        return
    assert name[0].isalnum()
    assert all(c.isalnum() or c in "_-" for c in name)
    assert name == name.lower()


def test_a_project_name_comes_from_the_file_s_name_line_first() -> None:
    text = "# x\nname: GLM53\nservices: {}\n"
    assert project_name(text, PurePosixPath("gpu02/tier.yaml"), "root") == "glm53"
    assert project_name("services: {}\n", PurePosixPath("gpu02/tier.yaml"), "r") == "gpu02"
    assert project_name("services: {}\n", PurePosixPath("tier.yaml"), "deploy") == "deploy"


def test_an_operation_that_began_and_never_ended_is_marked_interrupted(tmp_path: Path) -> None:
    log = OperationLog(tmp_path / "ops.jsonl")
    log.append({"event": "begin", "op_id": "a", "operation": "up", "services": ["r2"]})
    log.append({"event": "end", "op_id": "a", "exit_code": 0})
    log.append({"event": "begin", "op_id": "b", "operation": "down", "services": ["r1"]})
    log.close()
    with (tmp_path / "ops.jsonl").open("a") as torn:
        torn.write('{"event": "beg')  # a crash in the middle of a write
    again = OperationLog(tmp_path / "ops.jsonl")
    assert again.mark_interrupted() == ["b"]
    assert again.mark_interrupted() == []  # once only
    again.close()
    last = read_log(tmp_path / "ops.jsonl")[-1]
    assert (last["event"], last["op_id"], last["operation"]) == ("interrupted", "b", "down")


# Compose 2.40.3's lines for `--dry-run up -d --no-deps` of a service with an inline config.
COPY_STOP = [
    " DRY-RUN MODE -  Container otelcol-contrib  Recreate",
    " DRY-RUN MODE -  Container otelcol-contrib  Recreated",
    "  DRY-RUN MODE -  Could not find the file / in container a2376cda0e8f_otelcol-contrib",
]


def test_a_dry_run_stopped_at_the_config_copy_is_read_as_its_plan() -> None:
    assert stopped_at_config_copy(COPY_STOP)
    found = parse_dry_run(COPY_STOP, {"otelcol-contrib": {"container_name": "otelcol-contrib"}})
    assert found.changed == frozenset({"otelcol-contrib"})


@pytest.mark.parametrize(
    "lines",
    [
        COPY_STOP[2:],  # nothing planned before it
        COPY_STOP[:2],  # no copy line: a failure of another kind
        [*COPY_STOP, "Error response from daemon: No such image: x"],
        [*COPY_STOP, 'service "y" refers to undefined config z: invalid compose project'],
    ],
)
def test_any_other_dry_run_failure_stays_a_failure(lines: list[str]) -> None:
    assert not stopped_at_config_copy(lines)


def test_override_files_ride_in_the_body_and_follow_the_file_on_compose_s_line() -> None:
    """#37: base + override projects. The key is sent only when there are overrides, so an
    agent that knows one file per side never sees it."""
    target = Target("v2", "gpu02/compose.yaml", ("gpu02/override.yaml",))
    _, body = up_request(target, ["r2"], {}, force_recreate=False, dry_run=True)
    assert body["overrides"] == ["gpu02/override.yaml"]
    call = up_call(body)
    assert call.overrides == ("gpu02/override.yaml",)
    argv = compose_argv(("docker", "compose"), "p", "/c/a.yaml", "/c", call, ("/c/b.yaml",))
    assert argv[argv.index("-f") : argv.index("--project-directory")] == [
        "-f", "/c/a.yaml", "-f", "/c/b.yaml",
    ]  # fmt: skip
    _, plain = up_request(TARGET, ["r2"], {}, force_recreate=False, dry_run=True)
    assert "overrides" not in plain
    assert down_call(down_request(target, ["r2"], {})[1]).overrides == ("gpu02/override.yaml",)
    for bad in ("gpu02/override.yaml", [1], [""], ["x"] * 17):
        with pytest.raises(AgentRefusal, match="`overrides` must be a list"):
            up_call({**body, "overrides": bad})
