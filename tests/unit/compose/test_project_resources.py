"""``tierctl compose config`` on networks, ulimits, secrets/configs and build: the values
Docker Compose v2.40.3 prints for the same files (each expected value below was read from
``docker compose config --format json``; the differential suite checks the rest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tierctl.compose.project import ProjectOptions, file_mode, json_form, project_config
from tierctl.errors import ComposeInputError

ENV = {"SET": "value", "EMPTY": "", "PORT": "8080"}


def _read(tmp_path: Path, *texts: str) -> dict[str, Any]:
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"f{i}.yml"
        path.write_text(text)
        paths.append(path)
    options = ProjectOptions(project_directory=str(tmp_path), project_name="p", environ=ENV)
    return json_form(project_config(paths, options))


def test_secrets_default_their_target_and_modes_print_in_octal(tmp_path: Path) -> None:
    out = _read(
        tmp_path,
        "services:\n  w:\n    image: x\n"
        "    secrets: [s1, {source: s2, target: tgt, mode: 288, uid: '0'}]\n"
        "    configs: [c1, {source: c2, mode: '440'}, {source: c1, target: /z, mode: 0}]\n"
        "secrets:\n  s1: {file: ./s.txt}\n  s2: {environment: SET}\n"
        "configs:\n  c1: {content: a}\n  c2: {environment: SET}\n",
    )
    w = out["services"]["w"]
    assert w["secrets"] == [
        {"source": "s1", "target": "/run/secrets/s1"},
        {"source": "s2", "target": "tgt", "mode": "0440", "uid": "0"},
    ]
    assert w["configs"] == [
        {"source": "c1"},
        {"source": "c2", "mode": "0440"},
        {"source": "c1", "target": "/z", "mode": "00"},
    ]
    assert out["secrets"]["s1"] == {"file": str(tmp_path / "s.txt"), "name": "p_s1"}


@pytest.mark.parametrize(
    ("mode", "text"), [(288, "0440"), (420, "0644"), ("0440", "0440"), ("440", "0440"), (0, "00")]
)
def test_file_mode(mode: object, text: str) -> None:
    assert file_mode(mode) == text


def test_ulimits_are_cast_to_numbers_and_zeros_left_out(tmp_path: Path) -> None:
    out = _read(
        tmp_path,
        "services:\n  w:\n    image: x\n    ulimits:\n"
        "      a: '1024'\n      b: '${PORT}'\n      c: {soft: '10', hard: 20}\n"
        "      d: 0\n      e: {soft: 0, hard: 5}\n",
    )
    assert out["services"]["w"]["ulimits"] == {
        "a": 1024,
        "b": 8080,
        "c": {"soft": 10, "hard": 20},
        "d": {},
        "e": {"hard": 5},
    }


def test_a_ulimit_that_is_not_a_number_is_refused_located(tmp_path: Path) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read(tmp_path, "services:\n  w:\n    image: x\n    ulimits: {nofile: many}\n")
    assert err.value.location is not None
    assert err.value.location.line == 4
    assert "ulimits.nofile" in err.value.message


def test_networks_labels_options_aliases_and_ipam_as_compose_prints_them(tmp_path: Path) -> None:
    out = _read(
        tmp_path,
        "services:\n  w:\n    image: x\n    networks:\n"
        "      n: {aliases: [a, b, a], priority: 0}\n      m: {aliases: []}\n"
        "networks:\n  n: {labels: [k=v, bare], driver_opts: {mtu: 1400},"
        " ipam: {config: [{subnet: 10.0.0.0/16, gateway: 10.0.0.1}]}}\n"
        "  m: {labels: [], driver_opts: {}}\n",
        "services:\n  w:\n    networks:\n      n: {aliases: [c, b]}\n"
        "networks:\n  n: {ipam: {config: [{subnet: 10.0.0.0/16, gateway: 10.0.0.2}]}}\n",
    )
    assert out["services"]["w"]["networks"] == {"m": {}, "n": {"aliases": ["a", "b", "c"]}}
    n = out["networks"]["n"]
    assert n["labels"] == {"k": "v", "bare": ""}
    assert n["driver_opts"] == {"mtu": "1400"}
    assert n["ipam"] == {"config": [{"subnet": "10.0.0.0/16", "gateway": "10.0.0.2"}]}
    assert out["networks"]["m"] == {"name": "p_m", "ipam": {}}


def test_build_defaults_apply_after_the_merge_and_bare_args_read_the_environment(
    tmp_path: Path,
) -> None:
    out = _read(
        tmp_path,
        "services:\n  w:\n    image: x\n    build:\n      context: ./app\n"
        "      dockerfile: Dockerfile.dev\n      args: [A=1, SET, UNSET, EMPTY]\n"
        "      cache_from: []\n",
        "services:\n  w:\n    build:\n      args: {A: 2}\n      labels: [z=3]\n",
    )
    assert out["services"]["w"]["build"] == {
        "context": str(tmp_path / "app"),
        "dockerfile": "Dockerfile.dev",
        "args": {"A": "2", "SET": "value", "EMPTY": ""},
        "labels": {"z": "3"},
    }


def test_a_string_build_over_a_long_one_replaces_only_the_context(tmp_path: Path) -> None:
    out = _read(
        tmp_path,
        "services:\n  w:\n    image: x\n    build: {context: ., args: [B=], target: prod}\n",
        "services:\n  w:\n    build: ./app\n",
    )
    assert out["services"]["w"]["build"] == {
        "context": str(tmp_path / "app"),
        "dockerfile": "Dockerfile",
        "args": {"B": ""},
        "target": "prod",
    }


@pytest.mark.parametrize(
    ("text", "said", "line"),
    [
        ("    networks: [n]\n", "refers to undefined network n", 4),
        ("    secrets: [s]\n", "refers to undefined secret s", 4),
        ("    configs: [{source: c}]\n", "refers to undefined config c", 4),
        (
            "    network_mode: host\n    networks: [n]\nnetworks:\n  n: {}\n",
            "mutually exclusive `network_mode` and `networks`",
            5,
        ),
        ("    secrets: [s]\nsecrets:\n  s: {name: x}\n", "secrets.s: one of file|environment", 6),
        ("configs:\n  c: {name: x}\n", "configs.c: one of file|environment|content", 5),
    ],
)
def test_what_compose_refuses_is_refused_located(
    tmp_path: Path, text: str, said: str, line: int
) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read(tmp_path, "services:\n  w:\n    image: x\n" + text)
    assert said in err.value.message
    assert err.value.location is not None
    assert err.value.location.line == line


def test_gpus_are_device_requests_as_compose_prints_them(tmp_path: Path) -> None:
    # Read from docker compose config --format json (v2.40.3): `gpus: all` is one request
    # for every GPU, a list's entries read as deploy's device reservations (issue #36).
    out = _read(
        tmp_path,
        "services:\n  a:\n    image: x\n    gpus: all\n"
        "  b:\n    image: x\n    gpus: [{driver: nvidia}]\n"
        "  c:\n    image: x\n    gpus: [{count: '2'}]\n"
        "  d:\n    image: x\n    gpus: [{device_ids: ['0']}]\n",
    )
    gpus = {name: svc["gpus"] for name, svc in out["services"].items()}
    assert gpus == {
        "a": [{"count": -1}],
        "b": [{"driver": "nvidia", "count": -1}],
        "c": [{"count": 2}],
        "d": [{"device_ids": ["0"]}],
    }
