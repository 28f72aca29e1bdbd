"""Getting an engine release's source: a wheel from the package index, read as a zip.

The wheel is fetched with ``pip download --no-deps --only-binary=:all:`` into a cache folder
(pip already knows the user's index, proxy and credentials settings), and only the few
members that define flags are read; nothing is installed or imported.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tierctl.errors import InputError, RuntimeFailure

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def default_cache_dir() -> Path:
    """Where downloaded wheels are kept: ``$XDG_CACHE_HOME/tierctl/wheels``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tierctl" / "wheels"


#: How long one ``pip download`` may take (a 336 MB wheel over a slow link, with room).
PIP_TIMEOUT_S = 900


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, check=False, timeout=PIP_TIMEOUT_S
    )


def find_cached(distribution: str, version: str, cache_dir: Path) -> Path | None:
    """A wheel of exactly this release already in the cache, if any."""
    prefix = f"{distribution.replace('-', '_')}-{version}-"
    if not cache_dir.is_dir():
        return None
    hits = sorted(p for p in cache_dir.glob("*.whl") if p.name.startswith(prefix))
    return hits[0] if hits else None


def _run_live(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run pip with its output on this terminal (its progress bar included)."""
    return subprocess.run(
        list(argv),
        stdout=sys.stderr,
        stderr=sys.stderr,
        text=True,
        check=False,
        timeout=PIP_TIMEOUT_S,
    )


def download_wheel(
    distribution: str, version: str, cache_dir: Path, *, runner: Runner = _run
) -> Path:
    """The wheel of ``distribution==version``, from the cache or downloaded with pip.

    Raises:
        RuntimeFailure: pip failed (no network, no such release, no wheel for it).
    """
    cached = find_cached(distribution, version, cache_dir)
    if cached is not None:
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(cache_dir),
        f"{distribution}=={version}",
    ]
    if runner is _run and sys.stderr.isatty():
        # On a terminal pip draws its own download bar (a 336 MB wheel takes a while);
        # its output goes straight to the terminal, so a failure is read there.
        argv = [a for a in argv if a != "--quiet"]
        argv[argv.index("--dest") : argv.index("--dest")] = ["--progress-bar", "on"]
    try:
        result = _run_live(argv) if "--progress-bar" in argv else runner(argv)
    except subprocess.TimeoutExpired as exc:
        # An index that stops answering ended `catalog build` in a traceback (#41).
        raise RuntimeFailure(
            f"could not download {distribution}=={version}: pip gave no answer within "
            f"{exc.timeout:g} s",
            rule="a download that does not finish is a failure, not a hang",
            fix="check the network and the index (pip config list), or download the wheel "
            "yourself and pass `wheel` PATH",
            params=("wheel",),
        ) from exc
    found = find_cached(distribution, version, cache_dir)
    if result.returncode != 0 or found is None:
        tail = (
            (result.stderr or result.stdout or "pip's message is above").strip().splitlines()[-3:]
        )
        raise RuntimeFailure(
            f"could not download {distribution}=={version}: " + " / ".join(tail),
            fix="check the version exists on the index, or pass `wheel` PATH",
            params=("wheel",),
        )
    return found


def read_members(wheel: Path, wanted: Callable[[str], bool]) -> dict[str, str]:
    """Text of the wheel members ``wanted`` selects.

    Raises:
        InputError: the file is not a readable wheel.
    """
    try:
        with zipfile.ZipFile(wheel) as archive:
            return {
                name: archive.read(name).decode("utf-8")
                for name in archive.namelist()
                if wanted(name)
            }
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise InputError(f"{wheel}: not a readable wheel: {exc}") from exc


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks (wheels are hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def unpack_sources(wheel: Path, package: str, dest_root: Path) -> Path:
    """The ``.py`` files of ``package`` in ``wheel``, unpacked once under ``dest_root`` (a
    folder per wheel file); returns the folder to put on ``sys.path``.

    Raises:
        InputError: the file is not a readable wheel.
    """
    dest = dest_root / wheel.name.removesuffix(".whl")
    stamp = dest / ".tierctl-unpacked"
    if stamp.is_file():
        return dest
    prefix = package + "/"
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                # Only plain relative member names: a member climbing out (``..``) is skipped.
                if name.startswith(prefix) and name.endswith(".py") and ".." not in name:
                    archive.extract(name, dest)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{wheel}: not a readable wheel: {exc}") from exc
    stamp.write_text(wheel.name + "\n", encoding="utf-8")
    return dest
