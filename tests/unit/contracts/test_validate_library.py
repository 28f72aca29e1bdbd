"""validate() as a library: catalog history, host-network port clashes, clean examples."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import EXAMPLES, GLM_SPEC
from tests.strategies import spec_dicts
from tierctl.compose import load_compose
from tierctl.contracts.validation import validate, validate_paths
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec, load_spec_text


def _glm_with_version(version: str) -> str:
    return GLM_SPEC.read_text().replace("version: 0.5.23", f"version: {version}")


@pytest.mark.parametrize(
    "spec_path", sorted(EXAMPLES.glob("*/tier.yaml")), ids=lambda p: p.parent.name
)
def test_every_example_renders_then_validates_clean(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    compose = load_compose(render_compose(spec, spec_path=spec_path), source="rendered.yaml")
    report = validate(spec, [compose])
    assert report.violations == ()
    assert report.exit_code == 0


@pytest.mark.parametrize(
    "spec_path", sorted(EXAMPLES.glob("*/tier.yaml")), ids=lambda p: p.parent.name
)
def test_committed_example_files_validate_clean(spec_path: Path) -> None:
    report = validate_paths(spec_path)
    assert report.ok, report.text()


def test_flag_from_a_later_release_says_added_in() -> None:
    spec = load_spec_text(_glm_with_version("0.5.16"), "tier.yaml")
    compose = load_compose(render_compose(spec), source="c.yaml")
    report = validate(spec, [compose])
    messages = [v.message for v in report.violations if v.rule == "TC004"]
    assert (
        "--prefill-decode-interval is not a flag of sglang 0.5.16: added in 0.5.23; pin that release or drop the flag"
        in messages
    )
    assert {v.rule for v in report.violations} == {"TC004"}


def test_same_port_on_the_host_network_clashes() -> None:
    spec = load_spec(GLM_SPEC)
    text = render_compose(spec, spec_path=GLM_SPEC).replace('- "30002"', '- "30001"')
    report = validate(spec, [load_compose(text, source="c.yaml")])
    clashes = [v for v in report.violations if v.rule == "TC006"]
    assert [v.message for v in clashes] == [
        "--port 30001 is also used by model-sg-glm53-w4afp8-tp4-r1"
    ]


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(spec_dicts())
def test_render_then_validate_holds_every_structural_contract(data: dict[str, object]) -> None:
    # The shared strategy draws arbitrary flag names and values (new-flag-N, text for ints),
    # which the real engine catalog rightly rejects; every other contract must hold.
    spec = load_spec_text(dump_yaml(data), "gen.yaml")
    report = validate(spec, [load_compose(render_compose(spec), source="gen-compose.yaml")])
    # So can the GPU fit (TC006): a drawn tp-size/dp-size may need more GPUs than drawn.
    structural = [v for v in report.violations if "(TP x PP x DP" not in v.message]
    assert {v.rule for v in structural} <= {"TC004"}, report.text()


def test_a_literal_token_in_argv_is_flagged_and_never_printed() -> None:
    spec = load_spec(GLM_SPEC)
    token = "hf_" + "a1B2c3D4e5" * 3
    text = render_compose(spec, spec_path=GLM_SPEC).replace(
        "      - --enable-metrics\n",
        f"      - --enable-metrics\n      - --hf-token\n      - {token}\n",
        1,
    )
    report = validate(spec, [load_compose(text, source="c.yaml")])
    assert "TC006" in {v.rule for v in report.violations}
    assert any("is a literal credential (33 chars)" in v.message for v in report.violations)
    assert token not in report.text()
    assert token not in report.to_json()


def test_compose_scalars_are_read_as_compose_reads_them() -> None:
    """YAML 1.2 like go-yaml v3: `restart: no` is the string "no", `22:22` a string."""
    from tierctl.compose import parse_compose

    text = "services:\n  a:\n    image: x\n    restart: no\n    ports: [22:22]\n"
    service = parse_compose(text, source="c.yaml").services["a"]
    assert service.data["restart"] == "no"
    assert service.data["ports"] == ["22:22"]


TINY_SPEC = EXAMPLES / "tiny-vllm" / "tier.yaml"


def test_a_cpu_replica_reserves_no_gpu_and_a_reservation_added_by_hand_is_caught() -> None:
    spec = load_spec(TINY_SPEC)
    assert {r.gpu_count for r in spec.replicas.values()} == {0}
    text = render_compose(spec, spec_path=TINY_SPEC)
    assert "nvidia" not in text
    assert validate(spec, [load_compose(text, source="c.yaml")]).violations == ()
    # Someone gives r1 a GPU by hand: the spec says it runs on CPU.
    doc = load_compose(text, source="c.yaml").data
    doc["services"]["tiny-r1"]["deploy"] = {
        "resources": {
            "reservations": {
                "devices": [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
            }
        }
    }
    report = validate(spec, [load_compose(dump_yaml(doc), source="c.yaml")])
    found = [v for v in report.violations if v.rule == "TC003" and v.message.startswith("GPUs")]
    assert len(found) == 1
    assert found[0].service == "tiny-r1"
    assert "none (gpu_count: 0, a CPU replica)" in found[0].message
    assert found[0].found == "0"


def test_with_a_spec_compose_refusing_equal_ports_is_a_located_tc007() -> None:
    """The spec contracts' schema check reports the ``uniqueItems`` refusal Compose makes
    only one way round (``published: "9100"``, then ``published: 9100``), at the override."""
    spec = load_spec(GLM_SPEC)
    compose = load_compose(render_compose(spec, spec_path=GLM_SPEC), source="rendered.yaml")
    name = next(iter(compose.services))
    over = load_compose(
        f"services:\n  {name}:\n    ports:\n"
        '      - {target: 9100, published: "9100"}\n'
        "      - {target: 9100, published: 9100}\n",
        source="over.yaml",
    )
    report = validate(spec, [compose, over])
    [v] = [v for v in report.violations if v.rule == "TC007"]
    assert v.message.startswith(f"services.{name}.ports: ports items")
    assert v.location is not None
    assert v.location.file == "over.yaml"
    assert v.location.line == 3
