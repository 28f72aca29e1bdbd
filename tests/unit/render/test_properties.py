"""Laws of rendering, over generated specs (see tests/strategies.py)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import spec_dicts
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec_text

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _render(data: dict[str, Any]) -> str:
    return render_compose(load_spec_text(dump_yaml(data), "gen.yaml"))


def _flags_from_argv(argv: list[str]) -> dict[str, list[str]]:
    """An independent reading of an argv: each --flag owns the tokens up to the next --flag."""
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for token in argv:
        if token.startswith("--"):
            current = token[2:]
            flags.setdefault(current, [])
        elif current is not None:
            flags[current].append(token)
    return flags


def _expected_variant(service: dict[str, Any]) -> str:
    flags = _flags_from_argv(service["command"])
    env = service["environment"]
    qsplit = "-qsplit" if env.get("QSPLIT") == "1" else ""
    dyntok = "-dyntok" if "enable-dynamic-batch-tokenizer" in flags else ""
    pdi = flags["prefill-decode-interval"][-1]
    return f"v{qsplit}{dyntok}-pdi{pdi}-{service['labels']['tierctl.replica']}"


@SETTINGS
@given(spec_dicts())
def test_render_is_deterministic(data: dict[str, Any]) -> None:
    assert _render(data) == _render(copy.deepcopy(data))


@SETTINGS
@given(spec_dicts())
def test_every_variant_place_equals_the_template_applied_to_the_rendered_argv(
    data: dict[str, Any],
) -> None:
    doc = yaml.safe_load(_render(data))
    scrape = yaml.safe_load(doc["configs"]["tierctl-scrape"]["content"])
    scraped = {
        job["static_configs"][0]["labels"]["container_name"]: job["static_configs"][0]["labels"]
        for job in scrape["scrape_configs"]
    }
    engines = {n: s for n, s in doc["services"].items() if "tierctl.replica" in s.get("labels", {})}
    assert len(engines) == len(data["replicas"])
    for name, service in engines.items():
        expected = _expected_variant(service)
        assert service["labels"]["config_variant"] == expected
        assert service["logging"]["options"]["tag"] == f"{name}|{expected}"
        assert scraped[name]["config_variant"] == expected


@SETTINGS
@given(spec_dicts(), st.data())
def test_a_replica_override_changes_only_that_replicas_service(
    data: dict[str, Any], draw: st.DataObject
) -> None:
    before = yaml.safe_load(_render(data))
    replica = draw.draw(st.sampled_from(sorted(data["replicas"])))
    changed = copy.deepcopy(data)
    flag = draw.draw(
        st.sampled_from(["max-running-requests", "prefill-decode-interval", "extra-x"])
    )
    # Outside every generated range, so the override always changes the effective value.
    value = draw.draw(st.integers(2_000_000, 2_001_000))
    changed["replicas"][replica]["args"][flag] = value
    after = yaml.safe_load(_render(changed))
    target = f"eng-{replica}"
    assert before["services"][target] != after["services"][target]
    for name in before["services"]:
        if name != target:
            assert before["services"][name] == after["services"][name], name
    for job_before, job_after in zip(
        yaml.safe_load(before["configs"]["tierctl-scrape"]["content"])["scrape_configs"],
        yaml.safe_load(after["configs"]["tierctl-scrape"]["content"])["scrape_configs"],
        strict=True,
    ):
        if job_before["job_name"] != target:
            assert job_before == job_after
