"""The generated corpus is a function of its seed: same seed, byte-identical projects.

A failure the oracle finds must reproduce: on the next run, in CI, in a script, alone. The
checks draw the corpus in fresh processes that differ in everything that used to leak into
it (what else is imported, including a local module full of literals, and the hash seed) and
compare the bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.compose_oracle.corpus import draw_project, generate

ROOT = Path(__file__).resolve().parents[2]

_DIGEST = """
import hashlib, json, sys
sys.path[:0] = [{src!r}, {root!r}, {extra!r}]
if {noise}:
    import literals_module  # a local module: Hypothesis collects its literals
    import tierctl.cli.main  # and everything tierctl imports
from hypothesis import strategies as st
from tests.compose_oracle.corpus import draw_seeded, generate
cases = generate({n}, {seed})
text = json.dumps([[c.name, c.project.files, c.project.order] for c in cases])
# Wide integers are where Hypothesis mixes in the literals of loaded local modules.
text += json.dumps(draw_seeded(st.lists(st.integers(0, 99999), min_size=300, max_size=300), "i"))
print(hashlib.sha256(text.encode()).hexdigest())
"""


def _digest_in_fresh_process(tmp: Path, n: int, seed: int, *, noise: bool, hashseed: str) -> str:
    extra = tmp / "extra"
    extra.mkdir(exist_ok=True)
    literals = [f"X{i} = {i * 7919}\nS{i} = 'lit-{i}:{i}/udp'\n" for i in range(1, 13)]
    (extra / "literals_module.py").write_text("".join(literals))
    code = _DIGEST.format(
        src=str(ROOT / "src"), root=str(ROOT), extra=str(extra), noise=noise, n=n, seed=seed
    )
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_same_seed_gives_byte_identical_projects_in_any_process(tmp_path: Path) -> None:
    """Two processes, different imports and hash seeds, one seed: the same corpus."""
    quiet = _digest_in_fresh_process(tmp_path, 40, 0, noise=False, hashseed="1")
    noisy = _digest_in_fresh_process(tmp_path, 40, 0, noise=True, hashseed="2")
    assert quiet == noisy


def test_a_project_reproduces_alone() -> None:
    """Project ``i`` does not depend on the projects before it or on the corpus size."""
    cases = generate(12, seed=3)
    assert [c.name for c in cases] == [f"gen-3-{i}" for i in range(12)]
    for i in (0, 5, 11):
        alone = draw_project(3, i)
        assert (alone.files, alone.order) == (cases[i].project.files, cases[i].project.order)
    tail = generate(4, seed=3, start=8)
    assert [c.project.files for c in tail] == [c.project.files for c in cases[8:]]


def test_another_seed_explores_other_projects() -> None:
    """A fresh seed is a fresh corpus (the seed is not ignored)."""

    def digest(seed: int) -> str:
        text = json.dumps([c.project.files for c in generate(15, seed)])
        return hashlib.sha256(text.encode()).hexdigest()

    assert digest(0) != digest(1)
    assert len({json.dumps(c.project.files) for c in generate(30, 7)}) > 25
