"""A deployment repository for simulated hosts: files committed and tagged, as an operator's
repository holds each release of a host's compose files (the agent applies files by tag)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit_tag(repo: Path, tag: str, files: dict[str, str]) -> None:
    """Write ``files`` (path in the repository -> text) into the git repository ``repo``
    (created on first use), commit them, and tag the commit ``tag``."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", tag], check=True, timeout=60)
    subprocess.run([*git, "tag", tag], check=True, timeout=60)
