"""The planner's view of compose services: one long-form map per service, configs folded in.

How the file is read (anchors, interpolation, tokenising, list forms, errors) is tested once,
against the shared reader, in tests/unit/compose/.
"""

from __future__ import annotations

import pytest

from tierctl.errors import ComposeInputError
from tierctl.rollout.normalise import CONFIGS_KEY, load_services

ANCHORED = """
x-engine: &engine
  image: img@sha256:1
  labels: [config_variant=v1]
services:
  r1:
    <<: *engine
    command: sglang --port ${R1_PORT:-30001} --name "a b"
    environment: ["HF_TOKEN=${HF_TOKEN:?set HF_TOKEN}"]
  r2:
    <<: *engine
    entrypoint: [python3, -m]
    environment: {A: 1, B: "2"}
  col:
    image: otel
    configs: [{source: scrape, target: /etc/scrape.yaml}]
    depends_on: [r1, r2]
configs:
  scrape:
    content: "labels: {config_variant: v1}"
"""


def test_services_are_long_form_maps_with_defaults_applied_and_secrets_kept() -> None:
    svcs = load_services(ANCHORED, "c.yaml").services
    assert svcs["r1"]["image"] == "img@sha256:1"
    assert svcs["r1"]["command"] == ["sglang", "--port", "30001", "--name", "a b"]
    assert svcs["r2"]["entrypoint"] == ["python3", "-m"]
    assert "command" not in svcs["r2"]
    assert svcs["r1"]["environment"] == {"HF_TOKEN": "${HF_TOKEN:?set HF_TOKEN}"}
    assert svcs["r2"]["environment"] == {"A": "1", "B": "2"}
    assert svcs["r2"]["labels"] == {"config_variant": "v1"}


def test_given_variables_are_substituted() -> None:
    svcs = load_services(ANCHORED, "c.yaml", env={"R1_PORT": "7", "HF_TOKEN": "t"}).services
    assert svcs["r1"]["command"][2] == "7"
    assert svcs["r1"]["environment"] == {"HF_TOKEN": "t"}


def test_mounted_config_content_is_folded_into_the_service() -> None:
    svcs = load_services(ANCHORED, "c.yaml").services
    assert svcs["col"][CONFIGS_KEY] == {"scrape": {"content": "labels: {config_variant: v1}"}}
    assert svcs["col"]["depends_on"]["r1"]["condition"] == "service_started"
    assert CONFIGS_KEY not in svcs["r1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "no services mapping"),
        ("services:\n  a: {command: 'x \"y'}\n", "cannot split"),
    ],
)
def test_bad_compose_is_a_located_input_error(text: str, message: str) -> None:
    with pytest.raises(ComposeInputError, match=message) as info:
        load_services(text, "bad.yaml")
    assert info.value.exit_code == 2
    assert "bad.yaml" in info.value.format()


def test_an_empty_environment_or_label_map_is_no_map() -> None:
    # Compose's config drops both: the rendering of an imported spec writes
    # `environment: {}` where the file had none, and the plan must not call that a change.
    empty = load_services(
        "services:\n  a:\n    image: x\n    environment: {}\n    labels: []\n", "a"
    )
    absent = load_services("services:\n  a:\n    image: x\n", "b")
    assert empty.services == absent.services
