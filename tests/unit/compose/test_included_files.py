"""What an included file may hold, as Docker Compose v2.40.3 reads it (each verdict was read
from ``docker compose config``; found by the generated differential, issue #42): an included
file is a project of its own and its top level is checked on its own, where the including
file's check never sees what is not imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.compose.project import ProjectOptions, json_form, project_config
from tierctl.contracts.schema import refuse_invalid
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


def _read_files(tmp_path: Path, *texts: str) -> dict[str, object]:
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"f{i}.yml")
        paths[-1].write_text(text)
    options = ProjectOptions(project_directory=str(tmp_path), project_name="p", environ={})
    # With the schema check, as `tierctl compose config` reads (Compose validates each file).
    return json_form(project_config(paths, options, check=refuse_invalid))


BASE = "services:\n  a:\n    image: x\nvolumes:\n  v: {}\nnetworks:\n  n: {}\nsecrets:\n  s: {file: ./s}\n"


@pytest.mark.parametrize(
    "override", ["volumes:\n", "networks:\n", "secrets:\n", "volumes:\nnetworks:\n"]
)
def test_an_overrides_empty_section_adds_nothing_to_an_earlier_one(
    tmp_path: Path, override: str
) -> None:
    """Compose validates the merged project: ``volumes:`` with nothing under it, over an
    earlier file's volumes, is those volumes (tierctl refused it by the schema)."""
    assert list(_read_files(tmp_path, BASE, override)["services"]) == ["a"]  # type: ignore[call-overload]


def test_an_overrides_empty_section_with_none_earlier_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read_files(tmp_path, BASE, "configs:\n")
    assert err.value.location is not None
    assert err.value.location.file.endswith("f1.yml")


@pytest.mark.parametrize(
    "texts",
    [
        (BASE, ""),
        ("", BASE),
        ("# only a comment\n", BASE),
        (BASE, "", "\n"),
        ("include: []\n", BASE),
    ],
)
def test_a_file_without_a_document_among_several_adds_nothing(
    tmp_path: Path, texts: tuple[str, ...]
) -> None:
    assert list(_read_files(tmp_path, *texts)["services"]) == ["a"]  # type: ignore[call-overload]


@pytest.mark.parametrize("texts", [("", ""), ("include: []\n", ""), ("include: []\n",)])
def test_a_project_of_empty_files_is_refused(tmp_path: Path, texts: tuple[str, ...]) -> None:
    with pytest.raises(ComposeInputError) as err:
        _read_files(tmp_path, *texts)
    assert err.value.message == "empty compose file"
