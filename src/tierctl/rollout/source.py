"""Reading the two sides of a plan: a compose file path, or ``git:REF:PATH`` from a repository.

``git:REF:PATH`` is read with ``git show REF:PATH`` in the repository that holds the current
directory (or ``repo``), so OLD can be "what is deployed" (a tag) without checking it out.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tierctl.errors import ComposeInputError, InputError, Location
from tierctl.rollout.model import SourceRef


@dataclass(frozen=True)
class LoadedSource:
    """A source's reference and its text."""

    ref: SourceRef
    text: str


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
        ref, sep, path = spec[4:].partition(":")
        if not sep or not ref or not path:
            raise InputError(
                f"malformed git source {spec!r}",
                rule="a git source is git:REF:PATH",
                value=spec,
                fix="write e.g. git:v2026.11.1:prod/tier.yaml",
            )
        try:
            proc = subprocess.run(
                ["git", "show", f"{ref}:{path}"],
                cwd=repo,
                capture_output=True,
                check=False,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(
                f"cannot run git to read {spec}: {exc}",
                rule="git: sources are read with `git show`",
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
        try:
            data = Path(spec).read_bytes()
        except OSError as exc:
            raise InputError(
                f"cannot read compose file {spec}: {exc.strerror}",
                location=Location(file=spec),
                rule="--from/--to name a readable compose file or git:REF:PATH",
                fix="check the path",
            ) from None
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
