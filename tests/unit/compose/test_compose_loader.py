"""Reading compose files as docker compose sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.compose import Interpolation, load_compose, merge_compose, parse_compose
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


PLANNED = """
x-engine: &engine
  image: img@sha256:1
  environment: [A=1, B=2]
  labels: {config_variant: v1}
services:
  r1:
    <<: *engine
    command: python3 -m sglang.launch_server --port ${R1_PORT:-30001} --model-path "/m x"
    environment: [A=1, B=2, "HF_TOKEN=${HF_TOKEN:?set HF_TOKEN}"]
  r2:
    <<: *engine
    environment: {A: 1, B: "2", HF_TOKEN: "${HF_TOKEN:?set HF_TOKEN}"}
    command: ["python3", "-m", "sglang.launch_server", "--port", 30002, "--model-path", "/m x"]
  col:
    image: otel
    configs: [scrape, {source: rules, target: /etc/rules.yaml}, missing]
    depends_on: [r1, r2]
configs:
  scrape:
    content: "labels: {config_variant: v1}"
  rules:
    file: ./rules.yaml
"""


def test_defaults_mode_applies_defaults_and_keeps_unset_secrets() -> None:
    compose = parse_compose(PLANNED, source="c.yaml", interpolation=Interpolation.DEFAULTS)
    r1, r2 = compose.services["r1"], compose.services["r2"]
    assert r1.image == "img@sha256:1"  # through the << merge key
    assert r1.command == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--port",
        "30001",
        "--model-path",
        "/m x",
    )
    # Numbers in a list command become tokens, as compose does.
    assert r2.command is not None
    assert r2.command[4] == "30002"
    assert r1.environment["HF_TOKEN"] == "${HF_TOKEN:?set HF_TOKEN}"


def test_list_and_map_environment_normalise_to_the_same_map() -> None:
    compose = parse_compose(PLANNED, source="c.yaml", interpolation=Interpolation.DEFAULTS)
    r1, r2 = compose.services["r1"], compose.services["r2"]
    assert (
        r1.environment
        == r2.environment
        == {
            "A": "1",
            "B": "2",
            "HF_TOKEN": "${HF_TOKEN:?set HF_TOKEN}",
        }
    )
    assert r1.labels == r2.labels == {"config_variant": "v1"}


def test_mounted_configs_carry_their_top_level_definitions() -> None:
    compose = parse_compose(PLANNED, source="c.yaml")
    assert compose.services["col"].mounted_configs == {
        "scrape": {"content": "labels: {config_variant: v1}"},
        "rules": {"file": "./rules.yaml"},
        "missing": None,
    }
    assert compose.services["r1"].mounted_configs == {}


def test_entrypoint_is_tokenised_like_command() -> None:
    compose = parse_compose(
        "services:\n  a:\n    entrypoint: /bin/sh -c 'echo hi'\n    labels: [BARE]\n",
        source="c.yaml",
    )
    assert compose.services["a"].entrypoint == ("/bin/sh", "-c", "echo hi")
    assert compose.services["a"].command is None
    # A bare label key is an empty label, as compose reads it.
    assert compose.services["a"].labels == {"BARE": ""}


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("services: [a, b]", "must be a mapping of service name", None),
        ("services:\n  a: [1]\n", "services.a must be a mapping", 2),
        ("services:\n  a: {command: 'x \"y'}\n", "cannot split", 2),
        ("services:\n  a:\n    command: {x: 1}\n", "must be a string or a list", 3),
        ("services:\n  a:\n    environment: A=1\n", "must be a map or a list", 3),
        ("services: {a: {image: '${X'}}", "unclosed", 1),
        ("services:\n  a: {\n", "expected", 3),
    ],
)
def test_bad_compose_is_a_located_input_error(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ComposeInputError, match=message) as info:
        parse_compose(text, source="bad.yaml", interpolation=Interpolation.DEFAULTS)
    assert info.value.exit_code == 2
    assert "bad.yaml" in info.value.format()
    assert info.value.location is not None
    assert info.value.location.line == line


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
    assert info.value.fix == "set TOKEN in the environment"


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
