"""Short syntaxes read as Compose reads them (each row checked against the real binary by
the differential suite, tests/compose_oracle): ports, mounts, sizes, durations, and the
merge rules that issue 21 found wrong."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.compose import load_compose, merge_compose, parse_compose
from tierctl.compose.forms import FormError
from tierctl.compose.long_forms import (
    format_duration,
    parse_bytes,
    parse_duration_ns,
    parse_port,
    parse_volume,
)
from tierctl.compose.project import ProjectOptions, project_config
from tierctl.errors import ComposeInputError

PORTS = [
    ("80", [{"mode": "ingress", "target": 80, "protocol": "tcp"}]),
    ("8000:80", [{"mode": "ingress", "target": 80, "published": "8000", "protocol": "tcp"}]),
    (
        "127.0.0.1::81",
        [{"mode": "ingress", "host_ip": "127.0.0.1", "target": 81, "protocol": "tcp"}],
    ),
    (
        "[::1]:9000:90/udp",
        [
            {
                "mode": "ingress",
                "host_ip": "::1",
                "target": 90,
                "published": "9000",
                "protocol": "udp",
            }
        ],
    ),
    (
        "7000-7001:70-71",
        [
            {"mode": "ingress", "target": 70, "published": "7000", "protocol": "tcp"},
            {"mode": "ingress", "target": 71, "published": "7001", "protocol": "tcp"},
        ],
    ),
    (
        "6000-6001:60",
        [{"mode": "ingress", "target": 60, "published": "6000-6001", "protocol": "tcp"}],
    ),
]


@pytest.mark.parametrize(("text", "expected"), PORTS)
def test_ports_read_as_compose_prints_them(text: str, expected: list[dict[str, object]]) -> None:
    assert parse_port(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("300.1.1.1:80:80", "invalid IP address: 300.1.1.1"),
        ("8000:80/xyz", "invalid proto: xyz"),
        ("7000:70-71", "invalid ranges specified"),
    ],
)
def test_ports_compose_refuses(text: str, message: str) -> None:
    with pytest.raises(FormError, match=message):
        parse_port(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("./a:/b:c:d", {"type": "bind", "source": "./a", "target": "/b"}),  # c: is a drive
        ("v:/x:ro", {"type": "bind", "source": "v:/x", "target": "ro"}),
        ("vol:/x:ro,z", {"type": "volume", "source": "vol", "target": "/x", "read_only": True}),
        ("/anon", {"type": "volume", "target": "/anon"}),
    ],
)
def test_mounts_split_as_compose_splits_them(text: str, expected: dict[str, object]) -> None:
    got = parse_volume(text)
    assert {k: got[k] for k in expected} == expected


def test_mount_with_four_sections_is_refused() -> None:
    with pytest.raises(FormError, match="too many colons"):
        parse_volume("/a:/b:rw:z")


def test_sizes_and_durations_in_compose_spelling() -> None:
    assert parse_bytes("512m") == 536870912
    assert parse_bytes("1.5g") == 1610612736
    assert format_duration(parse_duration_ns("90s")) == "1m30s"
    assert format_duration(parse_duration_ns("500ms")) == "500ms"
    assert format_duration(parse_duration_ns("1h")) == "1h0m0s"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_string_env_file_in_an_override_appends(tmp_path: Path) -> None:
    """Issue 21: the override's string env_file replaced the base list; compose appends."""
    base = _write(tmp_path, "base.yml", "services: {a: {image: x, env_file: [common.env]}}\n")
    over = _write(tmp_path, "over.yml", "services: {a: {env_file: extra.env}}\n")
    merged = merge_compose([load_compose(base), load_compose(over)])
    assert merged.services["a"].data["env_file"] == ["common.env", "extra.env"]
    _write(tmp_path, "common.env", "A=1\n")
    _write(tmp_path, "extra.env", "B=2\n")
    config = project_config([base, over], ProjectOptions(project_name="p", environ={}))
    assert config["services"]["a"]["environment"] == {"A": "1", "B": "2"}


def test_one_port_in_both_syntaxes_is_one_port() -> None:
    """Compose keys ports by their text while merging, then once more in long form: the
    later of two equal ports stays, in the earlier one's place (fixture 001 found it)."""
    compose = parse_compose(
        "services: {a: {image: x, ports: ['8000:80', {target: 80, published: '8000', "
        "app_protocol: http}, '0.0.0.0:9000:90', '9000:90', '9000:90']}}\n",
        source="c",
    )
    assert len(compose.services["a"].data["ports"]) == 4  # '9000:90' twice is once
    assert compose.services["a"].ports == (
        {
            "mode": "ingress",
            "target": 80,
            "published": "8000",
            "protocol": "tcp",
            "app_protocol": "http",
        },
        {"mode": "ingress", "target": 90, "published": "9000", "protocol": "tcp"},
    )


def test_service_ports_apply_defaults_and_keep_addresses() -> None:
    compose = parse_compose(
        "services: {a: {image: x, ports: ['${A:-8008}:8008', '127.0.0.1:9000:90/udp']}}\n",
        source="c",
    )
    assert [
        (p.get("host_ip"), p.get("published"), p["protocol"]) for p in compose.services["a"].ports
    ] == [
        (None, "8008", "tcp"),
        ("127.0.0.1", "9000", "udp"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("environment: ['DEBUG = true']", "trailing space"),
        ("ports: ['300.1.1.1:80:80']", "invalid IP address"),
        ("labels: {1: a}", "non-string key"),
    ],
)
def test_compose_config_refuses_with_a_location(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, "c.yml", f"services:\n  a:\n    image: x\n    {body}\n")
    with pytest.raises(ComposeInputError, match=message) as info:
        project_config([path], ProjectOptions(environ={}))
    assert info.value.location is not None
    assert info.value.location.line == 4
    assert info.value.fix


def test_a_container_name_that_is_not_a_string_is_refused_not_a_crash(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """The fuzz suite's compose mutation: `container_name: [a]` on two services was a TypeError
    in the shared-name check (unhashable list); compose refuses it by the schema."""
    path = _write(
        tmp_path,
        "compose.yml",
        "services:\n  a: {image: x, container_name: [a]}\n  b: {image: x, container_name: [a]}\n",
    )
    project_config([path], ProjectOptions(project_name="p", environ={}))  # no TypeError
    # compose config refuses the input (2); validate reports a violation (1)
    for command, code in ((("compose", "config"), 2), (("validate",), 1)):
        result = run_cli(*command, str(path))
        assert result.code == code, (command, result)
        assert "container_name" in result.out + result.err
        assert "Traceback" not in result.out + result.err


def test_a_depends_on_string_is_a_schema_violation_not_a_crash(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """The long fuzz run's seed 9009: validate's cross-check read a project whose depends_on
    was a string without the schema check, and the normalising reader raised AttributeError."""
    path = _write(tmp_path, "compose.yml", 'services:\n  a: {image: x, depends_on: "b"}\n')
    result = run_cli("validate", str(path))
    assert result.code == 1, result
    assert "depends_on" in result.out
    assert "Traceback" not in result.out + result.err


def test_a_bad_duration_an_override_replaces_is_no_error(tmp_path: Path) -> None:
    """Compose parses durations after merging (the oracle's generated project gen-1-1649): a
    base's `interval: soon` that an override replaces is read; one that stays is refused."""
    base = _write(
        tmp_path,
        "base.yml",
        "services:\n  a:\n    image: x\n    healthcheck: {test: 'true', interval: soon}\n",
    )
    over = _write(tmp_path, "over.yml", "services:\n  a:\n    healthcheck: {interval: 90s}\n")
    options = ProjectOptions(project_name="p", environ={})
    config = project_config([base, over], options)
    assert config["services"]["a"]["healthcheck"]["interval"] == "1m30s"
    with pytest.raises(ComposeInputError, match="duration") as caught:
        project_config([base], options)
    assert caught.value.location is not None
    assert caught.value.location.line == 4


def test_a_bad_duration_in_an_inactive_service_is_refused(tmp_path: Path) -> None:
    """Compose decodes every service before profiles apply (the oracle's gen-1-1936)."""
    path = _write(
        tmp_path,
        "compose.yml",
        "services:\n  a: {image: x}\n  b:\n    image: x\n    profiles: [p]\n"
        "    healthcheck: {test: 'true', interval: soon}\n",
    )
    with pytest.raises(ComposeInputError, match="duration"):
        project_config([path], ProjectOptions(project_name="p", environ={}))


@pytest.mark.parametrize(
    ("path", "clean"),
    [
        ("", "."),
        ("/x/", "/x"),
        ("/x/../y", "/y"),
        ("//x//y/", "/x/y"),
        ("/..", "/"),
        ("a/../..", ".."),
        ("rel", "rel"),
        ("./a/./b", "a/b"),
    ],
)
def test_a_mount_target_is_cleaned_as_go_cleans_it(path: str, clean: str) -> None:
    from tierctl.compose.long_forms import go_path_clean

    assert go_path_clean(path) == clean
