"""compose-go's own test cases, as restated in ``tests/unit/compose``, turned into projects.

The unit tables state what tierctl must read; here each row becomes a whole project that the
real binary reads too: the merge table's base and override files (after a first file that
gives every service an image, which Compose needs), each interpolation row as an
environment value, each ``depends_on`` form in a service. The compose inputs the fuzzer
found failing (:data:`HOSTILE`) are judged the same way.
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


def _one_file(text: str) -> Project:
    return Project({"compose.yml": text}, ["compose.yml"])


def _ulimit(soft: str) -> str:
    return f'services:\n  a:\n    image: x\n    ulimits:\n      nofile:\n        soft: "{soft}"\n        hard: 5\n'


def _mode(mode: str) -> str:
    return (
        "services:\n  a:\n    image: x\n    secrets:\n      - source: s\n"
        f"        mode: {mode}\nsecrets:\n  s:\n    file: ./compose.yml\n"
    )


def _long(key: str, n: int) -> str:
    items = ", ".join(["1"] * n)
    return f"services:\n  a:\n    image: x\n    {key}: [{items}]\n"


#: Inputs the fuzzer found failing (issue #22; tests/unit/test_hostile_sweep_s10.py and
#: test_bounded_schema.py), judged by the binary itself: each reading or refusal must be
#: Compose's. Numbers and booleans as names, ulimits and modes at and past int64, a
#: collection as a mapping key, long wrong lists under a oneOf.
HOSTILE: list[tuple[str, str]] = [
    *[
        (f"a {section} named {key}", f"services:\n  a:\n    image: x\n{body}")
        for key in ("5", "-.inf", "1.5", "true", "~")
        for section, body in (
            ("service", f"  {key}:\n    image: y\n"),
            ("network", f"networks:\n  {key}: {{}}\n"),
            ("volume", f"volumes:\n  {key}: {{}}\n"),
            ("secret", f"secrets:\n  {key}:\n    file: ./compose.yml\n"),
            ("config", f"configs:\n  {key}:\n    file: ./compose.yml\n"),
        )
    ],
    ("a ulimit of 5,000 digits", _ulimit("9" * 5000)),
    ("a ulimit at int64's top", _ulimit("9223372036854775807")),
    ("a ulimit at int64's bottom", _ulimit("-0009223372036854775808")),
    ("a ulimit past int64", _ulimit("9223372036854775808")),
    ("a ulimit of leading zeros", _ulimit("0" * 5000 + "7")),
    *[
        (
            f"a ulimit of int {value}",
            f"services:\n  a:\n    image: x\n    ulimits:\n      nofile: {value}\n",
        )
        for value in (2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30)
    ],
    (
        "a soft ulimit of int 2**63 (Compose panics)",
        "services:\n  a:\n    image: x\n    ulimits:\n      nofile: {soft: 9223372036854775808, hard: 5}\n",
    ),
    ("a mode of 105 digits", _mode("9" * 105)),
    ("a mode past int64", _mode(str(2**63))),
    ("a mode at int64's top", _mode(str(2**63 - 1))),
    *[
        (
            f"a {what} as a mapping key",
            f"services:\n  a:\n    image: x\n    logging:\n      options:\n       {key}: v\n",
        )
        for what, key in (
            ("!reset []", "!reset []"),
            ("sequence", "? [a, b]\n       "),
            ("mapping", "? {a: 1}\n       "),
            ("!override mapping", "!override {b: 2}"),
        )
    ],
    (
        "build.secrets: a long list of ints",
        "services:\n  a:\n    image: x\n    build:\n      secrets: ["
        + ", ".join(["1"] * 3000)
        + "]\n",
    ),
    ("device_write_bps: a long list of ints", _long("blkio_config:\n      device_write_bps", 3000)),
    ("secrets: a long list of ints", _long("secrets", 3000)),
]


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
    for name, text in HOSTILE:
        cases.append(Case(f"hostile: {name}", _one_file(text)))
    return cases
