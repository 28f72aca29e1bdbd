"""compose-go's own test cases, as restated in ``tests/unit/compose``, turned into projects.

The unit tables state what tierctl must read; here each row becomes a whole project that the
real binary reads too: the merge table's base and override files (after a first file that
gives every service an image, which Compose needs), each interpolation row as an
environment value, each ``depends_on`` form in a service.
"""

from __future__ import annotations

import json

import yaml

from tests.compose_oracle.harness import Case, environ
from tests.compose_oracle.projects import Project
from tests.unit.compose.test_compose_merge_table import DEPENDS, MERGES
from tests.unit.compose.test_compose_template_table import (
    INVALID,
    REQUIRED_MISSING,
    SUBSTITUTED,
)
from tierctl.compose.tags import ComposeYamlLoader


def _services(text: str) -> list[str]:
    data = yaml.load(text, Loader=ComposeYamlLoader)
    services = data.get("services") if isinstance(data, dict) else None
    return [str(s) for s in services] if isinstance(services, dict) else []


def _merge_cases() -> list[Case]:
    out = []
    for name, base, over, _ in MERGES:
        names = sorted(set(_services(base)) | set(_services(over)))
        images = {"services": {n: {"image": "img"} for n in names}}
        files = {"images.yml": json.dumps(images) + "\n", "base.yml": base, "over.yml": over}
        out.append(Case(f"merge: {name}", Project(files, ["images.yml", "base.yml", "over.yml"])))
    return out


def _value_case(name: str, template: str, env: dict[str, str]) -> Case:
    text = json.dumps({"services": {"s": {"image": "img", "environment": {"V": template}}}})
    return Case(
        name, Project({"compose.yml": text + "\n"}, ["compose.yml"]), env={**environ(), **env}
    )


def table_cases() -> list[Case]:
    """Every restated row as a project for both readers."""
    cases = _merge_cases()
    for template, env, _ in SUBSTITUTED:
        cases.append(_value_case(f"template: {template}", template, env))
    for template, env, _, _ in REQUIRED_MISSING:
        cases.append(_value_case(f"required: {template}", template, env))
    for template in INVALID:
        cases.append(_value_case(f"invalid: {template}", template, {}))
    for form, _ in DEPENDS:
        text = (
            f"services:\n  web:\n    image: a\n    depends_on: {form}\n"
            "  db: {image: b}\n  redis: {image: c}\n  x-foo: {image: d}\n"
        )
        cases.append(Case(f"depends_on: {form}", Project({"compose.yml": text}, ["compose.yml"])))
    return cases
