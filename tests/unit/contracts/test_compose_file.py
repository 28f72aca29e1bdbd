"""Reading compose files as docker compose sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.contracts.compose_file import load_compose, merge_compose
from tierctl.errors import ComposeInputError

ANCHORS = """\
x-engine: &engine
  image: example/sglang@sha256:abc
  environment: &env
    A: "1"
    TOKEN: ${TOKEN:?set TOKEN}
  command: >
    python3 -m sglang.launch_server
    --model-path /m
    --served-model-name 'my model'
services:
  r1:
    <<: *engine
    environment:
      <<: *env
      B: two
  r2:
    <<: *engine
    command: ["python3", "-m", "sglang.launch_server", "--port", 30002, "--enable-metrics"]
    environment:
      - A=1
      - BARE
    labels: ["config_variant=v2"]
"""


def test_anchors_merge_keys_folded_and_list_commands() -> None:
    compose = load_compose(ANCHORS, source="c.yaml")
    r1, r2 = compose.services["r1"], compose.services["r2"]
    assert r1.image == "example/sglang@sha256:abc"
    assert r1.command == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--served-model-name",
        "my model",
    )
    assert r1.environment == {"A": "1", "TOKEN": "${TOKEN:?set TOKEN}", "B": "two"}
    assert r2.command == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--port",
        "30002",
        "--enable-metrics",
    )
    assert r2.environment == {"A": "1", "BARE": None}
    assert r2.labels == {"config_variant": "v2"}


def test_line_map_points_at_the_key() -> None:
    compose = load_compose(ANCHORS, source="c.yaml")
    location = compose.location("services", "r2", "command", 4)
    assert (location.file, location.line) == ("c.yaml", 18)
    assert location.path == "services.r2.command[4]"


def test_env_substitutes_when_given() -> None:
    compose = load_compose(ANCHORS, source="c.yaml", env={"TOKEN": "t"})
    assert compose.services["r1"].environment["TOKEN"] == "t"


def test_unset_required_variable_with_env_is_located() -> None:
    with pytest.raises(ComposeInputError) as info:
        load_compose(ANCHORS, source="c.yaml", env={})
    assert info.value.exit_code == 2
    assert info.value.location is not None
    assert info.value.location.line == 5
    assert "set TOKEN" in info.value.message


def test_bad_yaml_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("services:\n  a:\n    image: x\n   bad: indent\n")
    with pytest.raises(ComposeInputError) as info:
        load_compose(path)
    assert info.value.location is not None
    assert (info.value.location.file, info.value.location.line) == (str(path), 4)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ComposeInputError, match="cannot read compose file"):
        load_compose(tmp_path / "nope.yaml")


def test_override_file_replaces_command_and_merges_maps() -> None:
    base = load_compose(ANCHORS, source="base.yaml")
    over = load_compose(
        "services:\n  r2:\n    command: [python3, --port, '1']\n    environment: {C: '3'}\n",
        source="over.yaml",
    )
    merged = merge_compose([base, over])
    assert merged.services["r2"].command == ("python3", "--port", "1")
    assert merged.services["r2"].environment == {"A": "1", "BARE": None, "C": "3"}
    assert merged.location("services", "r2", "command").file == "over.yaml"
