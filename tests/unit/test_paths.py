"""Paths taken from files stay inside their root; writes never clobber what tierctl did not write.

The property: for any path built from ``..``, ``.``, names, a symlink that leaves the root,
a symlink that stays in it, NUL bytes and absolute starts, :func:`resolve_inside` either
refuses it (InputError, nothing else) or returns a path whose real location is inside the root.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.paths import resolve_inside, write_owned


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("paths")
    root, outside = base / "root", base / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "out").symlink_to(outside)  # leaves the root
    (root / "back").symlink_to(root / "sub")  # stays inside
    (root / "sub" / "up").symlink_to("../..")  # relative, climbs out
    return root, outside


_segment = st.sampled_from(["..", ".", "a", "sub", "out", "back", "up", "x\0y", "", "b.txt"])


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    segments=st.lists(_segment, min_size=0, max_size=6),
    absolute=st.booleans(),
    anchored=st.booleans(),
)
def test_a_resolved_path_never_leaves_its_root(
    world: tuple[Path, Path], segments: list[str], absolute: bool, anchored: bool
) -> None:
    root, _ = world
    text = ("/" if absolute else "") + "/".join(segments)
    try:
        got = resolve_inside(root, text, field="output", anchored=anchored)
    except InputError:
        return  # a clear refusal (anything else is a crash, and fails the test)
    real_root = root.resolve()
    real = got.resolve()
    assert real == real_root or real_root in real.parents, (text, real)
    assert got != root  # never the folder itself
    assert "\0" not in text
    assert anchored or not absolute


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../../etc/passwd", "climbs out with '..'"),
        ("a/../../x", "climbs out with '..'"),
        ("/etc/passwd", "is absolute"),
        ("out/victim.txt", "through a symlink"),
        ("sub/up/x", "through a symlink"),
        ("x\0y", "holds a NUL byte"),
        (".", "names the folder itself"),
        ("a" * 300, "longer than a file system allows"),
    ],
)
def test_escapes_are_refused_with_the_reason(world: tuple[Path, Path], path: str, why: str) -> None:
    root, _ = world
    with pytest.raises(InputError, match=why) as info:
        resolve_inside(root, path, field="output")
    assert info.value.value == path
    assert info.value.fix


def test_an_anchored_container_path_is_laid_under_the_root(world: tuple[Path, Path]) -> None:
    root, _ = world
    assert resolve_inside(root, "/models/x", field="t", anchored=True) == root / "models" / "x"
    assert resolve_inside(root, "/models/../y", field="t", anchored=True) == root / "y"
    with pytest.raises(InputError, match="climbs out"):
        # The reproducer: a bind mount target climbing out of the state folder.
        resolve_inside(root, "/../../../../tmp/victim.txt", field="t", anchored=True)


def test_inside_paths_and_symlinks_that_stay_are_kept(world: tuple[Path, Path]) -> None:
    root, _ = world
    assert resolve_inside(root, "back/file", field="o") == root / "back" / "file"
    assert resolve_inside(root, "sub/../b.txt", field="o") == root / "b.txt"


def test_write_owned_refuses_a_foreign_file_unless_forced(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("my notes\n")
    with pytest.raises(InputError, match="did not write") as info:
        write_owned(target, "new", ours=lambda t: t.startswith("#tierctl"))
    assert "`force`" in (info.value.fix or "")
    assert target.read_text() == "my notes\n"
    write_owned(target, "#tierctl 1", ours=lambda t: t.startswith("#tierctl"), force=True)
    assert target.read_text() == "#tierctl 1"
    # Its own file is replaced without being forced.
    write_owned(target, "#tierctl 2", ours=lambda t: t.startswith("#tierctl"))
    assert target.read_text() == "#tierctl 2"


def test_write_owned_never_replaces_a_protected_file(tmp_path: Path) -> None:
    spec = tmp_path / "tier.yaml"
    spec.write_text("name: x\n")
    link = tmp_path / "alias.yaml"
    link.symlink_to(spec)
    for target in (spec, link, tmp_path / "." / "tier.yaml"):
        with pytest.raises(InputError, match="the file it is made from"):
            write_owned(target, "services: {}\n", ours=lambda t: True, force=True, protect=[spec])
    assert spec.read_text() == "name: x\n"


def test_write_owned_keeps_the_mode_and_replaces_a_symlink_not_its_target(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("#tierctl keep\n")
    link = tmp_path / "out.txt"
    link.symlink_to(elsewhere)
    write_owned(link, "#tierctl new\n", ours=lambda t: t.startswith("#tierctl"))
    assert not link.is_symlink()
    assert elsewhere.read_text() == "#tierctl keep\n"
    os.chmod(link, 0o640)
    write_owned(link, "#tierctl newer\n", ours=lambda t: t.startswith("#tierctl"))
    assert link.stat().st_mode & 0o777 == 0o640
