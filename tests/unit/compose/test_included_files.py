"""What an included file may hold, as Docker Compose v2.40.3 reads it (each verdict was read
from ``docker compose config``; found by the generated differential, issue #42): an included
file is a project of its own and its top level is checked on its own, where the including
file's check never sees what is not imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.errors import ComposeInputError

MAIN = 'include: ["e.yml"]\nservices:\n  a:\n    image: y\n'


def _read(tmp_path: Path, main: str, included: str) -> dict[str, object]:
    (tmp_path / "e.yml").write_text(included)
    (tmp_path / "c.yml").write_text(main)
    options = ProjectOptions(project_directory=str(tmp_path), project_name="p", environ={})
    return json_form(project_config([tmp_path / "c.yml"], options))


@pytest.mark.parametrize("included", ["", "# only a comment\n", "\n", "services: {}\n", "x-a:\n"])
def test_an_included_file_without_resources_adds_nothing(tmp_path: Path, included: str) -> None:
    assert list(_read(tmp_path, MAIN, included)["services"]) == ["a"]  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("included", "said"),
    [
        ("---\n", "must be a mapping"),  # a null document, not an empty file
        ("null\n", "must be a mapping"),
        ("# c\n---\n", "must be a mapping"),
        ("volumes:\n", "volumes must be a mapping"),
        ("networks:\n", "networks must be a mapping"),
        ("secrets:\n", "secrets must be a mapping"),
        ("configs:\n", "configs must be a mapping"),
        ("services: {}\nbogus: 1\n", "additional properties 'bogus' not allowed"),
        ("version:\n", "version must be a string"),
        ("name: 5\n", "name must be a string"),
    ],
)
def test_what_compose_refuses_in_an_included_file(tmp_path: Path, included: str, said: str) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read(tmp_path, MAIN, included)
    assert said in err.value.message
    assert err.value.location is not None
    assert err.value.location.file.endswith("e.yml")


@pytest.mark.parametrize(
    ("main", "included"),
    [('include: ["e.yml"]\n', ""), ('include: ["e.yml"]\n', "x-a: 1\n"), ("include: []\n", "")],
)
def test_a_file_its_includes_leave_empty_is_refused(
    tmp_path: Path, main: str, included: str
) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read(tmp_path, main, included)
    assert err.value.message == "empty compose file"
    assert err.value.location is not None
    assert err.value.location.line == 1


def test_an_included_resource_keeps_the_file_from_being_empty(tmp_path: Path) -> None:
    out = _read(tmp_path, 'include: ["e.yml"]\n', "volumes: {v: {}}\n")
    assert out["services"] == {}
