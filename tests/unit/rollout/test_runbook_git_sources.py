"""The runbook's `docker compose` commands read the side they name, for every source form.

A plan from ``git:REF:PATH`` sides (what docs/rollout.md recommends) names the same PATH on
both sides; ``docker compose -f PATH`` runs whatever the working copy holds, so a rollback
written that way re-applied NEW. Each side's commands pipe that side's file in with
``git show REF:PATH``; the test runs that pipe's first half and checks it yields the side's
own bytes.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from rollout_examples import r2_at_interval_1, render_variant

from tierctl.rollout.entrypoints import make_runbook


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A deployment repository whose deploy/tier.yaml is OLD at tag v1 and NEW at v2 (and
    in the working copy)."""
    repo = tmp_path / "deploy-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    old = render_variant(tmp_path, "old", r2_at_interval_1).read_text()
    new = render_variant(tmp_path, "new").read_text()
    assert old != new
    target = repo / "deploy" / "tier.yaml"
    target.parent.mkdir()
    for tag, text in (("v1", old), ("v2", new)):
        target.write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", tag)
        _git(repo, "tag", tag)
    return repo, old, new


def _docker_lines(md: str, section: str) -> list[str]:
    """The `# or:` docker commands under every ``section`` heading of the runbook."""
    out = []
    for chunk in md.split(section)[1:]:
        block = chunk.split("```sh", 1)[1].split("```", 1)[0]
        out += [ln.removeprefix("# or: ") for ln in block.splitlines() if ln.startswith("# or: ")]
    return out


def test_a_git_old_side_is_rolled_back_to_with_olds_file(tmp_path: Path) -> None:
    repo, old, new = _repo(tmp_path)
    md = make_runbook("git:v1:deploy/tier.yaml", "git:v2:deploy/tier.yaml", repo=repo)
    rollbacks = _docker_lines(md, "Rollback (")
    assert rollbacks, md
    for line in rollbacks:
        show, compose = line.split(" | ")
        assert compose.startswith("docker compose --project-directory deploy -f - up -d ")
        # The pipe's source is OLD's bytes, not the working copy's NEW.
        assert _git(repo, *shlex.split(show)[1:]) == old
    applies = _docker_lines(md, "2. Apply")
    assert applies
    for line in applies:
        show, _ = line.split(" | ")
        assert _git(repo, *shlex.split(show)[1:]) == new
    assert "from the repository's root" in md


def test_file_sides_keep_their_paths(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old", r2_at_interval_1)
    new = render_variant(tmp_path, "new")
    md = make_runbook(str(old), str(new))
    for line in _docker_lines(md, "Rollback ("):
        assert line.startswith(f"docker compose -f {old} up -d --no-deps --force-recreate ")
    for line in _docker_lines(md, "2. Apply"):
        assert line.startswith(f"docker compose -f {new} up ")
