"""Reading the two sides of a plan: a compose file path, or ``git:REF:PATH`` from a repository.

``git:REF:PATH`` is read with ``git cat-file blob REF:PATH`` in the repository that holds the current
directory (or ``repo``), so OLD can be "what is deployed" (a tag) without checking it out.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tierctl.errors import ComposeInputError, InputError, Location
from tierctl.readers import read_bytes
from tierctl.rollout.plan_schema import SourceRef

# What a ref may hold: branch, tag and commit names, and the revision suffixes git knows
# (``~2``, ``^``, ``@{1}``). A leading ``-`` would make git read it as an option
# (``git:--output=FILE:x`` once wrote a file), so it is refused before git runs.
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/@{}~^+-]*")


def check_git_source(spec: str) -> tuple[str, str]:
    """(REF, PATH) of a ``git:REF:PATH`` source, both checked safe to hand to git.

    Raises:
        InputError: malformed, a REF that is not a plain revision name (an option, a space,
            a control character), or a PATH with a NUL, a newline or a leading ``-``.
    """
    ref, sep, path = spec[4:].partition(":")
    if not sep or not ref or not path:
        raise InputError(
            f"malformed git source {spec!r}",
            rule="a git source is git:REF:PATH",
            value=spec,
            fix="write e.g. git:v2026.11.1:prod/tier.yaml",
        )
    if not _REF.fullmatch(ref) or ".." in ref:
        raise InputError(
            "the REF of a git source is not a plain branch, tag or commit name",
            rule="REF starts with a letter, digit or _ and holds only A-Z a-z 0-9 . _ / @ { } ~ ^ + -",
            value=spec,
            fix="write e.g. git:v2026.11.1:prod/tier.yaml",
        )
    if path.startswith("-") or any(c in path for c in "\x00\n\r"):
        raise InputError(
            "the PATH of a git source is not a plain file path",
            rule="PATH holds no NUL or newline and does not start with -",
            value=spec,
            fix="write the file's path inside the repository, e.g. prod/tier.yaml",
        )
    return ref, path


@dataclass(frozen=True)
class LoadedSource:
    """A source's reference and its text."""

    ref: SourceRef
    text: str

    @property
    def folder(self) -> Path | None:
        """The folder an ``include`` of a file on disk is relative to; None for ``git:``."""
        return Path(self.ref.path).parent if self.ref.git_ref is None else None


def read_source(spec: str, repo: Path | None = None) -> LoadedSource:
    """Read a compose file given as a path or ``git:REF:PATH``.

    Args:
        spec: The argument as the operator wrote it.
        repo: The git repository for ``git:`` sources; the current directory by default.

    Returns:
        The reference (with the SHA-256 of the bytes) and the text.

    Raises:
        InputError: A malformed ``git:`` reference, a ref or path git cannot show, a missing
            or unreadable file.
    """
    if spec.startswith("git:"):
        ref, path = check_git_source(spec)
        try:
            # cat-file reads the blob as stored (no pager, no textconv); --end-of-options
            # keeps the checked argument from ever being read as an option.
            proc = subprocess.run(
                ["git", "cat-file", "blob", "--end-of-options", f"{ref}:{path}"],
                cwd=repo,
                capture_output=True,
                check=False,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(
                f"cannot run git to read {spec}: {exc}",
                rule="git: sources are read with `git cat-file`",
                fix="install git or pass a file path",
            ) from None
        if proc.returncode != 0:
            raise InputError(
                f"git cannot show {ref}:{path}: {proc.stderr.decode(errors='replace').strip()}",
                location=Location(file=spec),
                rule="REF must exist and PATH must be a file at that ref",
                value=spec,
                fix="check the ref with `git log` and the path with `git ls-tree REF`",
            )
        data = proc.stdout
        git_ref: str | None = ref
    else:
        path = spec
        data = read_bytes(spec, what="compose")
        git_ref = None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ComposeInputError(
            f"{spec} is not UTF-8 text",
            location=Location(file=spec),
            rule="a compose file is UTF-8 YAML",
            fix="point at the compose YAML file",
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    return LoadedSource(SourceRef(spec=spec, path=path, git_ref=git_ref, sha256=digest), text)
