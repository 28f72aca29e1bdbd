"""The local driver lays a real engine's bind mounts under its state folder and never outside
it: traversal in every field of a compose file that becomes a path there (the service name,
each mount's container path), and a symlink an earlier mount laid (no engine is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.errors import InputError, RuntimeFailure
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import load_sides
from tierctl.rollout.planner import plan_files

COMPOSE = """\
services:
  {name}:
    image: docker.io/lmsysorg/sglang@sha256:{z}
    command: [python3, -m, sglang.launch_server, --model-path, /models/m, --port, "18998"]
    volumes:
{volumes}"""


def _root(tmp_path: Path, name: str, *mounts: str) -> Path:
    path = tmp_path / "compose.yaml"
    volumes = "".join(f"      - {m}\n" for m in mounts)
    path.write_text(COMPOSE.format(name=name, z="0" * 64, volumes=volumes))
    dep, _ = load_sides(plan_files(str(path), str(path)))
    driver = LocalDriver(tmp_path / "state", engine="real", engine_python=Path("/bin/true"))
    return driver._mount_root(dep, name.strip('"'))


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    return victim


@pytest.mark.parametrize(
    "target",
    [
        "/../../../../{victim}",  # the reproducer
        "/models/../../../../../{victim}",
        "../{victim}",  # relative: read from the container's root, still climbing
        "/models/m/../../../../../../{victim}",
    ],
)
def test_a_mount_target_that_climbs_out_is_refused_and_nothing_is_touched(
    tmp_path: Path, target: str
) -> None:
    victim = _victim(tmp_path)
    with pytest.raises(InputError, match=r"bind mount target .* is outside"):
        _root(tmp_path, "engine", f"/etc/hostname:{target.format(victim=victim)}:ro")
    assert victim.read_text() == "keep\n"
    assert not victim.is_symlink()


@pytest.mark.parametrize("name", ['".."', '"."'])
def test_a_service_name_that_is_no_folder_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match="service name"):
        _root(tmp_path, name, "/etc/hostname:/models/m/x:ro")
    assert not (tmp_path / "state" / "models").exists()


def test_a_mount_inside_another_mount_would_write_through_its_link_and_is_refused(
    tmp_path: Path,
) -> None:
    # /data is laid as a link to the host folder; /data/victim.txt would then be created
    # (and an existing file deleted) inside that host folder. Longest target first: the
    # nested one is laid first and the outer one finds a folder there.
    host = tmp_path / "host"
    host.mkdir()
    victim = host / "victim.txt"
    victim.write_text("keep\n")
    with pytest.raises(RuntimeFailure, match="holds another mount's target"):
        _root(tmp_path, "engine", f"{host}:/data", "/etc/hostname:/data/victim.txt")
    assert victim.read_text() == "keep\n"


def test_a_link_an_earlier_run_laid_is_not_followed_out(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    victim = host / "victim.txt"
    victim.write_text("keep\n")
    root = _root(tmp_path, "engine", f"{host}:/data")
    assert (root / "data").resolve() == host
    # The next start has a mount under the folder the first one linked out.
    with pytest.raises(InputError, match="through a symlink"):
        _root(tmp_path, "engine", "/etc/hostname:/data/victim.txt")
    assert victim.read_text() == "keep\n"


def test_mounts_inside_the_root_are_laid_at_their_container_paths(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    root = _root(tmp_path, "engine", f"{model}:/models/m:ro", "/etc/hostname:/etc/x:ro")
    assert (root / "models" / "m").resolve() == model
    assert (root / "etc" / "x").resolve() == Path("/etc/hostname").resolve()
