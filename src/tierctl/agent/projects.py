"""The agent's projects directory: a git checkout of the deployment repository.

A request names a file by ``(tag, file)``: ``tag`` is a tag, branch or commit of the repository
in the projects directory and ``file`` a path inside it. The agent never runs compose on the
working tree (an operator may be editing it): it resolves the tag to a commit and extracts
that commit's tree once into ``STATE/checkouts/<commit>/``, where compose runs with the
file's folder as its project directory, so relative bind mounts and ``env_file`` resolve as
in a checkout. A checkout is keyed by the commit, so two tags of one commit share it, and a
file's digest (its blob's sha256) is what ``GET /files`` reports.

Everything a request names is refused when it could lead outside the projects directory:
``..``, absolute paths, NUL bytes, symlinks (the file itself, and any symlink in the
extracted tree that points out of it, :func:`tarfile.data_filter`), and tags that git would
read as options.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tierctl.errors import InputError
from tierctl.paths import resolve_inside

#: A tag, branch or commit as the agent accepts it: no leading ``-`` (git would read an
#: option), no ``..`` (a git range), no ``@{`` or ``:`` (revision syntax), printable ASCII.
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,199}")

#: A compose project name as Compose accepts it.
_PROJECT = re.compile(r"[a-z0-9][a-z0-9_-]*")

_NAME_LINE = re.compile(r"^name:[ \t]*([A-Za-z0-9_'\"-]+)[ \t]*(?:#.*)?$", re.MULTILINE)

#: The largest tree the agent extracts from one commit (a deployment repository is small).
MAX_TREE_BYTES = 64 * 1024 * 1024

_GIT_TIMEOUT_S = 60.0


class AgentRefusal(InputError):
    """A request the agent refuses; ``status`` is the HTTP status it answers with."""

    def __init__(self, message: str, *, status: int = 400, rule: str | None = None) -> None:
        """A refusal with its HTTP status and the rule it breaks."""
        super().__init__(message, rule=rule)
        self.status = status


@dataclass(frozen=True)
class Checkout:
    """One file of one commit, extracted where compose can run it.

    Attributes:
        tag: The tag as requested.
        commit: The commit it resolved to.
        file: The file's path inside the repository (POSIX).
        path: The file inside the extracted tree.
        project_dir: Its folder (compose's project directory).
        project: The compose project name (the file's ``name:``, else its folder's name).
        text: The file's text.
        sha256: The sha256 of the file's bytes.
    """

    tag: str
    commit: str
    file: str
    path: Path
    project_dir: Path
    project: str
    text: str
    sha256: str


class ProjectStore:
    """The deployment repository in ``root`` and the commits extracted under ``state_dir``."""

    def __init__(self, root: Path, state_dir: Path, *, git: str = "git") -> None:
        """Create the store.

        Args:
            root: The projects directory: a git checkout of the deployment repository.
            state_dir: Where extracted commits live (``state_dir/checkouts``).
            git: The git executable.
        """
        self.root = root.resolve()
        self._checkouts = state_dir / "checkouts"
        self._git = git

    def check(self) -> None:
        """Refuse to start on a projects directory that is not a git repository."""
        if not self.root.is_dir():
            raise InputError(
                f"projects directory {self.root} does not exist",
                rule="the agent serves the deployment repository checked out there",
                fix="git clone the deployment repository there, or pass another `projects_dir`",
                params=("projects_dir",),
            )
        done = self._run("rev-parse", "--git-dir", check=False)
        if done.returncode != 0:
            raise InputError(
                f"projects directory {self.root} is not a git repository",
                rule="requests name files by a tag or commit of the deployment repository",
                fix="git clone the deployment repository there (or `git init` and commit)",
                params=("projects_dir",),
            )

    def resolve(self, tag: str, file: str) -> Checkout:
        """The checkout of ``file`` at ``tag``, extracted on first use.

        Raises:
            AgentRefusal: a bad tag (400), a path out of the projects directory (400), a tag
                or file the repository does not have (404), a file that is not a regular
                file at that commit (400).
        """
        rel = self._relative(file)
        commit = self._commit(tag)
        listing = self._run("ls-tree", "-l", commit, "--", rel, check=False).stdout.split()
        if not listing:
            raise AgentRefusal(
                f"{file[:200]!r} is not in the repository at {tag}",
                status=404,
                rule="a call names a file of the deployment repository at its tag",
            )
        mode, kind = listing[0], listing[1]
        if kind != "blob" or mode not in ("100644", "100755"):
            raise AgentRefusal(
                f"{file!r} at {tag} is not a regular file (git mode {mode})",
                rule="the agent applies regular files; a symlink could point anywhere",
            )
        data = self._run_bytes("cat-file", "blob", f"{commit}:{rel}")
        tree = self._extract(commit)
        path = tree / rel
        text = data.decode("utf-8", errors="replace")
        return Checkout(
            tag=tag,
            commit=commit,
            file=rel,
            path=path,
            project_dir=path.parent,
            project=project_name(text, PurePosixPath(rel), self.root.name),
            text=text,
            sha256=hashlib.sha256(data).hexdigest(),
        )

    def _relative(self, file: str) -> str:
        if not isinstance(file, str) or not file:
            raise AgentRefusal("`file` must be a non-empty path", rule="`file` is a path")
        try:
            inside = resolve_inside(self.root, file, field="file", inside="the projects directory")
        except InputError as exc:
            raise AgentRefusal(exc.message, rule=exc.rule) from None
        return inside.relative_to(self.root).as_posix()

    def _commit(self, tag: str) -> str:
        if not isinstance(tag, str) or not _TAG.fullmatch(tag) or ".." in tag:
            raise AgentRefusal(
                f"tag {tag[:200]!r} is not a tag name the agent accepts",
                rule="tags match [A-Za-z0-9_][A-Za-z0-9_./+-]* without '..'",
            )
        done = self._run("rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}", check=False)
        commit = done.stdout.strip()
        if done.returncode != 0 or not commit:
            raise AgentRefusal(
                f"no tag or commit {tag!r} in the deployment repository",
                status=404,
                rule="a call names a tag or commit of the deployment repository",
            )
        return commit

    def _extract(self, commit: str) -> Path:
        """``checkouts/<commit>``: the commit's tree, extracted once (atomically, by rename)."""
        target = self._checkouts / commit
        if target.is_dir():
            return target
        archive = self._run_bytes("archive", "--format=tar", commit)
        if len(archive) > MAX_TREE_BYTES:
            raise AgentRefusal(
                f"commit {commit[:12]} holds {len(archive):,} bytes of files",
                rule=f"the agent extracts trees up to {MAX_TREE_BYTES:,} bytes",
            )
        self._checkouts.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=self._checkouts))
        try:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                # data_filter refuses absolute names, `..`, and links that lead out of the tree.
                tar.extractall(staging, filter="data")
            staging.rename(target)
        except FileExistsError:  # another request extracted it first
            shutil.rmtree(staging, ignore_errors=True)
        except (tarfile.TarError, OSError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if target.is_dir():
                return target
            raise AgentRefusal(
                f"commit {commit[:12]} cannot be extracted: {exc}",
                rule="a commit's tree stays inside its checkout (no link out, no absolute path)",
            ) from None
        return target

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self._git, "-C", str(self.root), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
        if check and done.returncode != 0:
            raise AgentRefusal(f"git {args[0]} failed: {done.stderr.strip()[:200]}", status=500)
        return done

    def _run_bytes(self, *args: str) -> bytes:
        done = subprocess.run(
            [self._git, "-C", str(self.root), *args],
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()[:200]
            raise AgentRefusal(f"git {args[0]} failed: {said}", status=500)
        return done.stdout


def project_name(text: str, file: PurePosixPath, root_name: str) -> str:
    """The compose project of a file: its top-level ``name:``, else its folder's name (the
    repository's for a file at the top), lower-cased to Compose's rule."""
    # A plain top-level `name:` line, read without parsing the YAML (the file is compose's to
    # read; a name it interpolates is not one the agent can lock on, so the folder's is used).
    named = _NAME_LINE.search(text)
    raw = named.group(1).strip("'\"") if named else (file.parent.name or root_name)
    name = re.sub(r"[^a-z0-9_-]", "", raw.lower()).lstrip("_-")
    if not _PROJECT.fullmatch(name):
        raise AgentRefusal(
            f"no compose project name can be made from {raw!r}",
            rule="project names match [a-z0-9][a-z0-9_-]*",
        )
    return name
