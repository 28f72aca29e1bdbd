"""The compose normaliser sees services the way `docker compose config` does."""

from __future__ import annotations

import pytest

from tierctl.errors import ComposeInputError
from tierctl.rollout.normalise import CONFIGS_KEY, load_services

ANCHORED = """
x-engine: &engine
  image: img@sha256:1
  environment: [A=1, B=2]
  labels: {config_variant: v1}
services:
  r1:
    <<: *engine
    command: python3 -m sglang.launch_server --port ${R1_PORT:-30001} --model-path "/m x"
  r2:
    <<: *engine
    environment: {A: 1, B: "2"}
    command: ["python3", "-m", "sglang.launch_server", "--port", 30002, "--model-path", "/m x"]
  col:
    image: otel
    configs: [scrape]
    depends_on: [r1, r2]
configs:
  scrape:
    content: "labels: {config_variant: v1}"
"""


def test_merge_keys_interpolation_and_tokenised_command() -> None:
    svcs = load_services(ANCHORED, "c.yaml").services
    assert svcs["r1"]["image"] == "img@sha256:1"
    assert svcs["r1"]["command"] == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--port",
        "30001",
        "--model-path",
        "/m x",
    ]
    # Numbers in a list command become tokens, as compose does.
    assert svcs["r2"]["command"][4] == "30002"


def test_list_and_map_environment_normalise_to_the_same_map() -> None:
    svcs = load_services(ANCHORED, "c.yaml").services
    assert svcs["r1"]["environment"] == svcs["r2"]["environment"] == {"A": "1", "B": "2"}


def test_mounted_config_content_is_folded_into_the_service() -> None:
    svcs = load_services(ANCHORED, "c.yaml").services
    assert svcs["col"][CONFIGS_KEY] == {"scrape": {"content": "labels: {config_variant: v1}"}}
    assert svcs["col"]["depends_on"]["r1"]["condition"] == "service_started"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("services: [a, b]", "no services mapping"),
        ("services:\n  a: [1]\n", "not a mapping"),
        ("services:\n  a: {command: 'x \"y'}\n", "cannot split"),
        ("services: {a: {image: '${X'}}", "unterminated"),
        ("services:\n  a: {\n", "cannot parse compose YAML"),
    ],
)
def test_bad_compose_is_a_located_input_error(text: str, message: str) -> None:
    with pytest.raises(ComposeInputError, match=message) as info:
        load_services(text, "bad.yaml")
    assert info.value.exit_code == 2
    assert "bad.yaml" in info.value.format()
