"""Override files, ``!reset``/``!override``, ``include``, ``extends``, duplicate keys and
``depends_on`` defaults: compose-go's loader and override test cases, restated as data.

Each MERGES row is (case, base file, override file, expected merged services) — what
``docker compose -f base -f override config`` shows for the keys involved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tierctl.compose import load_compose, merge_compose, parse_compose
from tierctl.errors import ComposeInputError

MERGES: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "volumes append (override/merge_volumes_test)",
        "services: {t: {image: foo, volumes: ['a:/a', {type: bind, source: ./b, target: /b}]}}",
        "services: {t: {volumes: ['c:/c']}}",
        {"t": {"volumes": ["a:/a", {"type": "bind", "source": "./b", "target": "/b"}, "c:/c"]}},
    ),
    (
        "a mount re-pointed at the same target replaces it (uncity volumeIndexer)",
        "services: {t: {image: foo, volumes: ['./models:/models:ro', 'cache:/root/.cache']}}",
        "services: {t: {volumes: ['/nvme/models:/models:ro']}}",
        {"t": {"volumes": ["/nvme/models:/models:ro", "cache:/root/.cache"]}},
    ),
    (
        "long and short mount syntax share the target key",
        "services: {t: {volumes: [{type: volume, source: hf, target: /root/.cache}]}}",
        "services: {t: {volumes: ['/data/hf:/root/.cache']}}",
        {"t": {"volumes": ["/data/hf:/root/.cache"]}},
    ),
    (
        "command replaced whole",
        "services: {t: {command: [a, b, c]}}",
        "services: {t: {command: [x]}}",
        {"t": {"command": ["x"]}},
    ),
    (
        "healthcheck test replaced, other healthcheck keys merged",
        "services: {t: {healthcheck: {test: [CMD, a], interval: 5s}}}",
        "services: {t: {healthcheck: {test: [CMD, b]}}}",
        {"t": {"healthcheck": {"test": ["CMD", "b"], "interval": "5s"}}},
    ),
    (
        "environment merges by key across list and map forms",
        "services: {t: {environment: [A=1, B=2]}}",
        "services: {t: {environment: {B: '3', C: '4'}}}",
        {"t": {"environment": {"A": "1", "B": "3", "C": "4"}}},
    ),
    (
        "ports: same text kept once, new one appended",
        "services: {t: {ports: ['8000:8000']}}",
        "services: {t: {ports: ['8000:8000', '9000:9000']}}",
        {"t": {"ports": ["8000:8000", "9000:9000"]}},
    ),
    (
        "depends_on list and long forms merge by name with compose's defaults",
        "services: {t: {depends_on: [db]}}",
        "services: {t: {depends_on: {db: {condition: service_healthy}, cache: {}}}}",
        {
            "t": {
                "depends_on": {
                    "db": {"condition": "service_healthy", "required": True},
                    "cache": {"condition": "service_started", "required": True},
                }
            }
        },
    ),
    (
        "logging options merge when the driver is the same",
        "services: {t: {logging: {driver: json-file, options: {max-size: 10m}}}}",
        "services: {t: {logging: {options: {max-file: '3'}}}}",
        {
            "t": {
                "logging": {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}
            }
        },
    ),
    (
        "logging replaced when the driver changes",
        "services: {t: {logging: {driver: json-file, options: {max-size: 10m}}}}",
        "services: {t: {logging: {driver: syslog}}}",
        {"t": {"logging": {"driver": "syslog"}}},
    ),
    (
        "!reset removes a key (loader/merge_reset_test)",
        "services: {foo: {build: {context: .}, environment: {FOO: BAR}, ports: ['80:80']}}",
        "services:\n  foo:\n    image: foo\n    build: !reset\n    environment:\n"
        "      FOO: !reset\n    ports: !reset []\n",
        {"foo": {"image": "foo", "environment": {}}},
    ),
    (
        "!override replaces a list instead of appending",
        "services: {t: {volumes: ['a:/a', 'b:/b']}}",
        "services:\n  t:\n    volumes: !override\n      - c:/c\n",
        {"t": {"volumes": ["c:/c"]}},
    ),
    (
        "!override replaces a map instead of merging (loader/reset_test TestOverrideReplace)",
        "services: {t: {image: x}}\nnetworks: {test: {name: test, external: true}}",
        "networks:\n  test: !override {}\n",
        {"t": {"image": "x"}},
    ),
    (
        "devices (GPU reservations) append, as compose does",
        "services: {t: {deploy: {resources: {reservations: {devices: "
        "[{driver: nvidia, device_ids: ['0'], capabilities: [gpu]}]}}}}}",
        "services: {t: {deploy: {resources: {reservations: {devices: "
        "[{driver: nvidia, device_ids: ['1'], capabilities: [gpu]}]}}}}}",
        {
            "t": {
                "deploy": {
                    "resources": {
                        "reservations": {
                            "devices": [
                                {"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]},
                                {"driver": "nvidia", "device_ids": ["1"], "capabilities": ["gpu"]},
                            ]
                        }
                    }
                }
            }
        },
    ),
]


@pytest.mark.parametrize(
    ("case", "base", "over", "expected"), MERGES, ids=[m[0][:50] for m in MERGES]
)
def test_compose_go_merge_table(case: str, base: str, over: str, expected: dict[str, Any]) -> None:
    merged = merge_compose(
        [
            parse_compose(base + "\n", source="base.yaml"),
            parse_compose(over + "\n", source="o.yaml"),
        ]
    )
    for name, keys in expected.items():
        data = merged.services[name].data
        for key, value in keys.items():
            got = data.get(key)
            if key == "environment":
                got = merged.services[name].environment
            if key == "depends_on":
                got = merged.services[name].depends_on
            assert got == value, case
        if case.startswith("!reset"):
            assert set(data) == set(keys), case
    if "TestOverrideReplace" in case:
        assert merged.data["networks"]["test"] == {}


def test_reset_network_removes_it() -> None:
    merged = merge_compose(
        [
            parse_compose("networks:\n  test: {name: test, external: true}\n", source="a"),
            parse_compose("networks:\n  test: !reset {}\n", source="b"),
        ]
    )
    assert "test" not in merged.data["networks"]


def test_a_file_alone_drops_reset_and_keeps_override_values() -> None:
    compose = parse_compose(
        "services:\n  t:\n    image: x\n    ports: !reset []\n    volumes: !override [a:/a]\n",
        source="c.yaml",
    )
    assert compose.services["t"].data == {"image": "x", "volumes": ["a:/a"]}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # loader/merge_reset_test Test_DuplicateReset
        ("services:\n  foo:\n    command: hello\n    command: !reset hello world\n", 4),
        ("services:\n  a:\n    image: x\n    environment:\n      A: 1\n      A: 2\n", 6),
        ("services:\n  a: {image: x}\n  a: {image: y}\n", 3),
    ],
)
def test_duplicate_keys_are_refused_with_both_lines(text: str, line: int) -> None:
    with pytest.raises(ComposeInputError, match="already defined at line") as info:
        parse_compose(text, source="dup.yaml")
    assert info.value.location is not None
    assert info.value.location.line == line
    assert "dup.yaml" in info.value.format()


def test_merge_key_repeated_is_not_a_duplicate() -> None:
    text = "x-a: &a {image: x}\nx-b: &b {user: u}\nservices:\n  s:\n    <<: *a\n    <<: *b\n"
    # PyYAML reads repeated merge keys; compose (go-yaml) too.
    compose = parse_compose(text, source="c.yaml")
    assert compose.services["s"].data["image"] == "x"


def test_anchor_that_contains_itself_is_a_located_error() -> None:
    with pytest.raises(ComposeInputError, match="alias of itself") as info:
        parse_compose("services:\n  a: &a\n    x: *a\n", source="c.yaml")
    assert info.value.location is not None


def test_shared_aliases_are_not_cycles() -> None:
    text = "x: &e {A: '1'}\nservices:\n  a: {image: i, environment: *e}\n  b: {image: i, environment: *e}\n"
    compose = parse_compose(text, source="c.yaml")
    assert compose.services["b"].environment == {"A": "1"}


# --- depends_on ------------------------------------------------------------------------

DEPENDS: list[tuple[str, dict[str, Any]]] = [
    (
        "[db, redis]",
        {
            "db": {"condition": "service_started", "required": True},
            "redis": {"condition": "service_started", "required": True},
        },
    ),
    (
        "{db: {condition: service_healthy, restart: true}, redis: {condition: service_started}}",
        {
            "db": {"condition": "service_healthy", "restart": True, "required": True},
            "redis": {"condition": "service_started", "required": True},
        },
    ),
    ("[x-foo]", {"x-foo": {"condition": "service_started", "required": True}}),
    ("{db: {required: false}}", {"db": {"condition": "service_started", "required": False}}),
]


@pytest.mark.parametrize(("form", "expected"), DEPENDS)
def test_depends_on_long_form_gets_compose_defaults(form: str, expected: dict[str, Any]) -> None:
    compose = parse_compose(
        f"services:\n  web:\n    image: a\n    depends_on: {form}\n", source="c"
    )
    assert compose.services["web"].depends_on == expected


def test_equal_depends_on_forms_plan_as_unchanged() -> None:
    from tierctl.rollout.normalise import load_services

    a = load_services("services:\n  w: {image: a, depends_on: [db]}\n", "a")
    b = load_services(
        "services:\n  w: {image: a, depends_on: {db: {condition: service_started}}}\n", "b"
    )
    assert a.services == b.services


# --- include ---------------------------------------------------------------------------


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_imports_services_and_resources(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "proxy/compose.yaml",
        "services:\n  nginx: {image: nginx:1.27, ports: ['80:80']}\nnetworks:\n  front: {}\n",
    )
    main = _write(
        tmp_path,
        "compose.yaml",
        "include:\n  - proxy/compose.yaml\nservices:\n  engine: {image: vllm/vllm-openai:v0.10.1}\n",
    )
    compose = load_compose(main)
    assert set(compose.services) == {"nginx", "engine"}
    assert compose.data["networks"] == {"front": {}}
    assert "include" not in compose.data
    # Lines of the included file are known too.
    assert compose.location("services", "nginx", "ports").file.endswith("proxy/compose.yaml")


def test_include_long_form_with_several_paths_merges_them(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", "services:\n  r: {image: x, environment: {A: '1'}}\n")
    _write(tmp_path, "b.yaml", "services:\n  r: {environment: {B: '2'}}\n")
    main = _write(tmp_path, "c.yaml", "include:\n  - path: [a.yaml, b.yaml]\n")
    compose = load_compose(main)
    assert compose.services["r"].environment == {"A": "1", "B": "2"}


def test_a_service_an_included_file_defines_is_not_redefined(tmp_path: Path) -> None:
    # docker compose v2.40.3: "services.r conflicts with imported resource" (issue #36); the
    # same definition again is accepted, an empty included file reads as no resources.
    _write(tmp_path, "a.yaml", "services:\n  r: {image: x, command: [a]}\n")
    main = _write(tmp_path, "c.yaml", "include: [a.yaml]\nservices:\n  r: {command: [b]}\n")
    with pytest.raises(ComposeInputError, match=r"services\.r conflicts with imported resource"):
        load_compose(main)
    same = _write(
        tmp_path, "s.yaml", "include: [a.yaml]\nservices:\n  r: {image: x, command: [a]}\n"
    )
    assert load_compose(same).services["r"].data == {"image": "x", "command": ["a"]}
    _write(tmp_path, "e.yaml", "")
    empty = _write(tmp_path, "m.yaml", "include: [e.yaml]\nservices:\n  r: {image: x}\n")
    assert list(load_compose(empty).services) == ["r"]


def test_include_cycle_and_missing_file_are_located(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", "include: [b.yaml]\nservices: {}\n")
    _write(tmp_path, "b.yaml", "include: [a.yaml]\nservices: {}\n")
    with pytest.raises(ComposeInputError, match="include cycle"):
        load_compose(tmp_path / "a.yaml")
    main = _write(tmp_path, "m.yaml", "services: {}\ninclude:\n  - nope.yaml\n")
    with pytest.raises(ComposeInputError, match="cannot read") as info:
        load_compose(main)
    assert info.value.location is not None
    assert info.value.location.line == 3


def test_include_in_text_without_a_folder_is_refused_not_ignored() -> None:
    with pytest.raises(ComposeInputError, match="include names files relative"):
        parse_compose("include: [a.yaml]\nservices: {}\n", source="git:HEAD:c.yaml")


# --- extends ---------------------------------------------------------------------------


def test_extends_in_the_same_file_merges_over_the_base() -> None:
    text = """\
services:
  base:
    image: lmsysorg/sglang:v0.5.3
    environment: {A: "1"}
    volumes: ["./m:/models"]
    command: [python3, -m, sglang.launch_server, --port, "30000"]
  r1:
    extends: base
    environment: {B: "2"}
    volumes: ["/nvme/m:/models"]
  r2:
    extends: {service: r1}
    command: [python3, -m, sglang.launch_server, --port, "30001"]
"""
    compose = parse_compose(text, source="c.yaml")
    r1, r2 = compose.services["r1"], compose.services["r2"]
    assert r1.environment == {"A": "1", "B": "2"}
    assert r1.data["volumes"] == ["/nvme/m:/models"]
    assert r1.image == "lmsysorg/sglang:v0.5.3"
    assert "extends" not in r1.data
    assert r2.command is not None
    assert r2.command[-1] == "30001"
    assert r2.environment == {"A": "1", "B": "2"}


def test_extends_from_another_file(tmp_path: Path) -> None:
    _write(tmp_path, "common.yaml", "services:\n  gpu: {image: x, ipc: host, shm_size: 16g}\n")
    main = _write(
        tmp_path,
        "c.yaml",
        "services:\n  e:\n    extends: {file: common.yaml, service: gpu}\n    shm_size: 32g\n",
    )
    compose = load_compose(main)
    assert compose.services["e"].data == {"image": "x", "ipc": "host", "shm_size": "32g"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("services:\n  a:\n    extends: nope\n", "not found"),
        ("services:\n  a: {extends: b}\n  b: {extends: a}\n", "extends cycle"),
        ("services:\n  a:\n    extends: {file: x.yaml}\n", "needs a service name"),
    ],
)
def test_bad_extends_is_located(text: str, message: str) -> None:
    with pytest.raises(ComposeInputError, match=message) as info:
        parse_compose(text, source="c.yaml")
    assert info.value.location is not None
    assert info.value.location.line is not None


def test_merged_documents_are_plain_yaml() -> None:
    compose = parse_compose("services:\n  t:\n    volumes: !override [a:/a]\n", source="c")
    yaml.safe_dump(compose.data)  # no tag objects left behind
