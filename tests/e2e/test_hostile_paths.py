"""#22's path reproducers, run as an operator runs them: every path taken from a file stays
inside the folder it belongs to, and no writer replaces what tierctl did not write.

- a NEW compose file whose engine mounts ``/etc/hostname:/../../../../PATH/victim.txt:ro``:
  ``rollout --driver local --engine real`` used to delete victim.txt and lay a symlink there
  before any gate ran; ``validate`` accepted the file;
- a spec whose ``output:`` is the spec's own file name, a NUL byte, a symlink out of the
  folder;
- ``plan -o`` / ``runbook -o`` over a file that is not theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tierctl.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small-model" / "tier.yaml"

COMPOSE = """\
services:
  engine-r1:
    image: docker.io/lmsysorg/sglang@sha256:{z}
    command: [python3, -m, sglang.launch_server, --model-path, /models/m, --host, 127.0.0.1,
              --port, "{port}"{extra}]
{volumes}"""


def tierctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "tierctl", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _compose(path: Path, volumes: str = "", extra: str = "") -> Path:
    path.write_text(COMPOSE.format(z="0" * 64, port=18999, extra=extra, volumes=volumes))
    return path


def test_a_mount_target_climbing_out_of_the_state_folder_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    state = tmp_path / "work" / "state"
    climb = "/.." * 8 + str(victim)
    old = _compose(tmp_path / "old.yaml")
    new = _compose(
        tmp_path / "new.yaml",
        volumes=f"    volumes:\n      - /etc/hostname:{climb}:ro\n",
        extra=", --mem-fraction-static, '0.8'",
    )
    plan = tmp_path / "plan.json"
    made = tierctl("plan", "--from", str(old), "--to", str(new), "-o", str(plan), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    # validate flags the target (it names a different place to every reader)...
    checked = tierctl("validate", str(new), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"volume 0's container path '{climb}' climbs with '..'" in checked.stdout
    # ...and the local driver refuses it before it touches anything.
    res = tierctl(
        "rollout", "--plan", str(plan), "--driver", "local", "--local-engine", "real",
        "--state-dir", str(state), "--start-timeout-s", "5", cwd=tmp_path,
    )  # fmt: skip
    assert not victim.is_symlink()
    assert victim.read_text() == "keep me\n"
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert "bind mount target" in res.stderr
    assert "is outside" in res.stderr


def _spec(folder: Path, output: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "tier.yaml"
    shutil.copy(SMALL, spec)
    for extra in SMALL.parent.iterdir():
        if extra.name != "tier.yaml" and extra.is_file():
            shutil.copy(extra, folder / extra.name)
    text = spec.read_text()
    assert "\noutput: " in text
    lines = [f"output: {json.dumps(output)}" if ln.startswith("output: ") else ln
             for ln in text.splitlines()]  # fmt: skip
    spec.write_text("\n".join(lines) + "\n")
    return spec


def test_output_set_to_the_spec_itself_is_refused_even_with_force(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "s", "tier.yaml")
    before = spec.read_text()
    res = tierctl("render", str(spec), "--write", "--force", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "the file it is made from" in res.stderr
    assert spec.read_text() == before
    # The same through -o, and through a path that spells it differently.
    res = tierctl("render", str(spec), "--write", "--force", "-o", str(spec.parent / "." / "tier.yaml"),
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2
    assert spec.read_text() == before


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("compose\u0000.yaml", "NUL byte"),  # refused by the spec model already
        ("../compose.yaml", "climbs out with '..'"),
        ("/tmp/compose.yaml", "is absolute"),
        ("link/compose.yaml", "through a symlink"),
    ],
)
def test_output_that_leaves_the_folder_is_refused(tmp_path: Path, output: str, said: str) -> None:
    spec = _spec(tmp_path / "s", output)
    (spec.parent / "link").symlink_to(tmp_path)
    res = tierctl("render", str(spec), "--write", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert said in res.stderr
    assert "output" in res.stderr  # the field, and the spec file, are named
    assert str(spec) in res.stderr
    assert not (tmp_path / "compose.yaml").exists()


@pytest.mark.parametrize("command", ["plan", "runbook"])
def test_o_refuses_a_file_it_did_not_write_unless_forced(tmp_path: Path, command: str) -> None:
    old = _compose(tmp_path / "old.yaml")
    new = _compose(tmp_path / "new.yaml", extra=", --mem-fraction-static, '0.8'")
    out = tmp_path / "notes.txt"
    out.write_text("my own notes\n")
    args = (command, "--from", str(old), "--to", str(new), "-o", str(out))
    res = tierctl(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "did not write" in res.stderr
    assert "--force" in res.stderr
    assert out.read_text() == "my own notes\n"
    assert tierctl(*args, "--force", cwd=tmp_path).returncode == 0
    written = out.read_text()
    assert written != "my own notes\n"
    # Its own output is replaced without --force (a re-plan after an edit).
    new.write_text(new.read_text().replace("'0.8'", "'0.7'"))
    assert tierctl(*args, cwd=tmp_path).returncode == 0
    assert out.read_text() != written
    # Never over its own inputs.
    res = tierctl(command, "--from", str(old), "--to", str(new), "-o", str(new), "--force",
                  cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2
    assert "the file it is made from" in res.stderr


def test_bench_out_keeps_a_report_it_did_not_write(tmp_path: Path) -> None:
    """`bench run --out DIR` replaces its own results.json and report.md, never another file
    of that name (the writer `bench run` and `bench ab` call, on its own)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("# my analysis\n")
    from tierctl.bench.execute import _write

    with pytest.raises(InputError, match="did not write") as info:
        _write(out, {"kind": "run"}, "# tierctl bench run: x\n")
    assert "`out_dir`" in (info.value.fix or "")
    assert (out / "report.md").read_text() == "# my analysis\n"
    (out / "report.md").write_text("# tierctl bench run: older\n")
    _write(out, {"kind": "run"}, "# tierctl bench run: x\n")
    assert (out / "report.md").read_text() == "# tierctl bench run: x\n"
