"""``tierctl compose config`` on long mount options and ``env_file`` formats: the values
Docker Compose v2.40.3 prints for the same files (each expected value was read from
``docker compose config --format json``; found by the generated differential, issue #42)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tierctl.compose.dotenv import DotenvError, read_raw_env
from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.errors import ComposeInputError

ENV = {"SET": "value", "EMPTY": ""}


def _read(tmp_path: Path, text: str, **files: str) -> dict[str, Any]:
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    path = tmp_path / "c.yml"
    path.write_text(text, encoding="utf-8")
    options = ProjectOptions(project_directory=str(tmp_path), project_name="p", environ=ENV)
    return json_form(project_config([path], options))


def _volumes(tmp_path: Path, volumes: str) -> Any:
    text = f"services:\n  a:\n    image: x\n    volumes: {volumes}\n"
    return _read(tmp_path, text)["services"]["a"]["volumes"]


@pytest.mark.parametrize(
    ("mount", "expected"),
    [
        ("{type: bind, source: ./d, target: /d, bind: {create_host_path: false}}", {}),
        ('{type: bind, source: ./d, target: /d, bind: {create_host_path: "false"}}', {}),
        (
            "{type: bind, source: ./d, target: /d, bind: {create_host_path: true}}",
            {"create_host_path": True},
        ),
    ],
)
def test_create_host_path_false_is_left_out(tmp_path: Path, mount: str, expected: Any) -> None:
    [out] = _volumes(tmp_path, f"[{mount}]")
    assert out["bind"] == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [("1g", {"size": "1073741824"}), ("1024", {"size": "1024"}), ("0", {}), ('"1.5g"', {"size": "1610612736"}),
     ('"${UNSET:-64m}"', {"size": "67108864"})],
)  # fmt: skip
def test_tmpfs_size_is_a_byte_size(tmp_path: Path, size: str, expected: Any) -> None:
    [out] = _volumes(tmp_path, f"[{{type: tmpfs, target: /t, tmpfs: {{size: {size}}}}}]")
    assert out["tmpfs"] == expected


@pytest.mark.parametrize(
    ("mount", "said"),
    [
        ("{type: bind, target: /x}", 'invalid mount config for type "bind": field Source'),
        ('{type: tmpfs, target: /t, tmpfs: {size: "abc"}}', "invalid size: 'abc'"),
    ],
)
def test_mounts_compose_refuses_are_refused_located(tmp_path: Path, mount: str, said: str) -> None:
    with pytest.raises(ComposeInputError) as err:
        _volumes(tmp_path, f"[{mount}]")
    assert said in err.value.message
    assert err.value.location is not None
    assert err.value.location.line == 4


def test_an_empty_bind_source_is_the_project_folder(tmp_path: Path) -> None:
    [out] = _volumes(tmp_path, '[{type: bind, source: "", target: /d}]')
    assert out["source"] == str(tmp_path)


_RAW = (
    "R1=plain\n  # comment\nR2='s' # kept\nR3=${SET}\nR4=$$x\n\tR5= sp \r\n"
    "R6=x=y\nR7=\nSET\nUNSET\n\ufeffR8=1\n"
)


def test_a_raw_env_file_is_taken_as_written(tmp_path: Path) -> None:
    text = "services:\n  a:\n    image: x\n    env_file: [{path: r.env, format: raw}]\n"
    env = _read(tmp_path, text, **{"r.env": "\ufeff" + _RAW})["services"]["a"]["environment"]
    # Compose prints a literal $ as $$ (json_form does too).
    assert env == {
        "R1": "plain",
        "R2": "'s' # kept",
        "R3": "$${SET}",
        "R4": "$$$$x",
        "R5": " sp ",
        "R6": "x=y",
        "R7": "",
        "SET": "value",
        "\ufeffR8": "1",
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("export A=1\n", "variable 'export A' contains whitespaces"),
        ("A=1\nA B=1\n", "variable 'A B' contains whitespaces"),
        ("A =1\n", "variable 'A ' contains whitespaces"),
        ("BARE KEY\n", "variable 'BARE KEY' contains whitespaces"),
        ("=x\n", "no variable name on line '=x'"),
    ],
)
def test_raw_lines_compose_refuses(text: str, said: str) -> None:
    with pytest.raises(DotenvError) as err:
        read_raw_env(text, {})
    assert said in str(err.value)
    assert err.value.line == text.count("\n")


def test_an_unknown_env_file_format_is_refused_located(tmp_path: Path) -> None:
    text = "services:\n  a:\n    image: x\n    env_file: [{path: r.env, format: bogus}]\n"
    with pytest.raises(ComposeInputError) as err:
        _read(tmp_path, text, **{"r.env": "A=1\n"})
    assert "unsupported env_file format 'bogus'" in err.value.message
    assert err.value.location is not None
    assert err.value.location.line == 4


@pytest.mark.parametrize("project", ["a_b", "compose-oracle-18h9_x", "p"])
def test_an_external_resource_is_named_by_its_key_whatever_the_project(
    tmp_path: Path, project: str
) -> None:
    """Found by the differential: the key was cut from ``PROJECT_KEY`` at the first ``_``,
    so a project named ``a_b`` printed an external network ``b_ext`` (Compose: ``ext``)."""
    text = (
        "services:\n  a:\n    image: x\n    networks: [ext]\n    secrets: [s]\n"
        "networks:\n  ext: {external: true}\nsecrets:\n  s: {external: true}\n"
    )
    (tmp_path / "c.yml").write_text(text)
    options = ProjectOptions(project_directory=str(tmp_path), project_name=project, environ={})
    out = json_form(project_config([tmp_path / "c.yml"], options))
    assert out["networks"]["ext"]["name"] == "ext"
    assert out["secrets"]["s"]["name"] == "s"
