"""Where a path taken from a file may point, and writing a file without losing someone's.

Every path that tierctl takes from an input file (a spec's ``output:``, a compose file's bind
mount target, a service name that becomes a folder) and turns into a file it creates, replaces
or deletes goes through :func:`resolve_inside`: it is resolved against the folder it belongs to
(its *root*) and refused when it could leave it. Refused, with the file, the field and the fix
named: a NUL byte; an absolute path where a relative one belongs; any ``..`` that climbs above
the root; a symlink, anywhere along the way, that leads out of the root; a path naming the root
itself (there is no file to write there); a name the file system cannot hold. Where the root
stands for ``/`` (a container's file system laid out under a folder), an absolute path is
read from the root (``anchored``).

:func:`write_owned` replaces a file atomically, and only a file tierctl wrote (the caller says
how it knows) unless ``force``; whatever ``force`` says, it never replaces a file in
``protect`` (the spec a rendering comes from).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from tierctl.errors import InputError, Location

__all__ = ["resolve_inside", "write_owned"]


def resolve_inside(
    root: Path,
    path: str | os.PathLike[str],
    *,
    field: str,
    location: Location | None = None,
    anchored: bool = False,
    fix: str | None = None,
    inside: str | None = None,
    params: tuple[str, ...] = (),
) -> Path:
    """``path`` resolved against ``root``, refused if it could lead out of it.

    Args:
        root: The folder the path belongs in (need not exist yet).
        path: The path as the file gave it.
        field: What the path is, for the message (``output``, ``bind mount target``).
        location: The file (and line) the path came from.
        anchored: An absolute path is read from ``root`` (``root`` stands for ``/``);
            otherwise an absolute path is refused.
        fix: How to correct it (a default names the root).
        inside: What ``root`` is, for the message (``the spec's folder``; default its path).
        params: The library parameters ``fix`` names.

    Returns:
        ``root`` joined with the path, ``..`` and ``.`` folded away (no symlink followed).

    Raises:
        InputError: the path holds a NUL byte, is absolute where it may not be, climbs out of
            ``root`` by ``..`` or by a symlink, names ``root`` itself, or cannot be a file name.
    """
    text = os.fspath(path)
    where = inside or str(root)

    def refuse(why: str, *, escape: bool = True) -> InputError:
        return InputError(
            f"{field} {text!r} is outside {where}: it {why}"
            if escape
            else f"{field} {text!r} {why}",
            location=location,
            rule=f"a {field} taken from a file stays inside {where}",
            value=text,
            fix=fix or f"give a relative path inside {where}, without '..' above it",
            params=params,
        )

    if "\0" in text:
        raise refuse("holds a NUL byte", escape=False)
    if not text:
        raise refuse("is empty", escape=False)
    pure = PurePosixPath(text.replace(os.sep, "/"))
    if pure.is_absolute():
        if not anchored:
            raise refuse("is absolute")
        pure = PurePosixPath(*pure.parts[1:]) if len(pure.parts) > 1 else PurePosixPath()
    parts: list[str] = []
    for part in pure.parts:
        if part == "..":
            if not parts:
                raise refuse("climbs out with '..'")
            parts.pop()
        elif part != ".":
            parts.append(part)
    if not parts:
        raise refuse("names the folder itself, not a file in it", escape=False)
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts):
        raise refuse("has a name longer than a file system allows (255 bytes)", escape=False)
    target = root.joinpath(*parts)
    try:
        real_root = root.resolve()
        # Every symlink along the way is followed: one that leads out of root is an escape,
        # however the path was written.
        real = target.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise refuse(f"cannot be resolved ({exc})", escape=False) from None
    if real != real_root and real_root not in real.parents:
        raise refuse(f"leads there through a symlink (to {real})")
    return target


def write_owned(
    path: Path,
    text: str,
    *,
    ours: Callable[[str], bool],
    force: bool = False,
    protect: Iterable[Path] = (),
    what: str = "file",
    force_param: str | None = "force",
    elsewhere: str = "write elsewhere",
    params: tuple[str, ...] = (),
    check_only: bool = False,
) -> str | None:
    """Write ``text`` to ``path`` atomically (a temporary file in its folder, fsynced, renamed),
    keeping the mode of the file it replaces.

    Args:
        path: The file.
        text: The whole new content.
        ours: Whether the current content was written by tierctl (a marker it carries).
        force: Replace a file tierctl did not write too.
        protect: Files never replaced, ``force`` or not (the spec a rendering comes from).
        what: What the file is, for the message.
        force_param: The library parameter that forces (named in the fix); None when the
            caller has none.
        elsewhere: How to write somewhere else, for the fix.
        params: The library parameters ``elsewhere`` names.
        check_only: Refuse as a write would, but write nothing: a writer of several files
            checks them all first, so a refusal on the second leaves no new first file.

    Returns:
        The previous content, or None when there was no file.

    Raises:
        InputError: ``path`` is in ``protect``, or holds a file tierctl did not write and
            ``force`` is not given, or cannot be read.
    """
    for kept in protect:
        if _same_file(path, kept):
            raise InputError(
                f"refusing to write the {what} over {kept}, the file it is made from",
                location=Location(file=str(path)),
                rule="no-clobber: tierctl never replaces its own input",
                fix="point the output at another file",
            )
    check_output_path(path, what)
    _regular_or_absent(path, what)
    try:
        current: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read the existing {what}: {exc}",
            location=Location(file=str(path)),
            rule="no-clobber: a file is replaced only when tierctl can tell it wrote it",
            fix="move it away or point the output elsewhere",
        ) from None
    if current is not None and current != text and not force and not ours(current):
        forced = f", or pass `{force_param}` to replace it" if force_param else ""
        raise InputError(
            f"refusing to overwrite a {what} that tierctl did not write",
            location=Location(file=str(path)),
            rule="no-clobber",
            fix=f"move it away, {elsewhere}{forced}",
            params=(*params, *((force_param,) if force_param else ())),
        )
    if check_only or current == text:
        return current
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp creates 0600; the file keeps the mode of the one it replaces, or gets the
        # mode a plain write would give it (0666 less the umask).
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return current


def check_output_path(path: Path, what: str = "file") -> None:
    """Refuse an output path no file system takes: a NUL byte, a name over 255 bytes, a path
    over 4,096 bytes (``Path.exists`` raised ``OSError: File name too long`` on 300 ``é``)."""
    text = str(path)
    problem = ""
    if "\x00" in text:
        problem = "holds a NUL byte"
    elif len(text.encode("utf-8", "surrogatepass")) > 4096:
        problem = "is over 4,096 bytes long"
    elif any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in path.parts):
        problem = "has a name over 255 bytes long"
    if problem:
        raise InputError(
            f"cannot write the {what} there: the path {problem}",
            location=Location(file=text[:200]),
            rule="a path names files a file system can hold",
            fix="pass a shorter path without NUL bytes",
        )


def _regular_or_absent(path: Path, what: str) -> None:
    """Refuse a target that exists and is not a regular file: a device is never read (``-o
    /dev/full`` read zeros until MemoryError) nor renamed over (``/dev/null`` would become a
    regular file), a FIFO would block, a folder cannot be replaced."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cannot write the {what} there: {exc}",
            location=Location(file=str(path)),
            fix="point the output at a regular file in an existing folder",
        ) from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
        raise InputError(
            f"refusing to write the {what}: the path is {kind}",
            location=Location(file=str(path)),
            rule="tierctl writes regular files only (atomically: a new file renamed over the old)",
            fix="point the output at a regular file",
        )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except (OSError, ValueError):
        return False


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
