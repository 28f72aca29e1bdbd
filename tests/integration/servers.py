"""The three tierctl HTTP servers as an operator starts them, each its own process on a free
loopback port: ``agent serve`` (over a one-commit repository, the real compose binary),
``judge serve`` (over an example spec, a Prometheus where nothing listens) and ``sim serve``.

Shared by the slow-client tests and the HTTP fuzzer (``tests/http_fuzz.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "glm53-long-context" / "tier.yaml"
#: The agent's token: a secret no answer may echo, in any encoding.
AGENT_TOKEN = "agent-tok-7f3a9c1e5b2d8046aa11"
#: The judge's Prometheus password: in its URL's userinfo, never in an answer.
PROM_PASSWORD = "prom-pw-4e1b7d9a2c6f3850bb22"
KINDS = ("agent", "judge", "sim")
#: With the simulator's vLLM surface (its own routes).
ALL_KINDS = (*KINDS, "sim-vllm")
_ANNOUNCED = re.compile(r"(?:listening on|tierctl agent on|tierctl judge on) https?://\S+:(\d+)")


@dataclass
class Served:
    """One running server: its kind, port, process, and the folders it may write."""

    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    writable: tuple[Path, ...] = ()
    secrets: tuple[str, ...] = ()
    log: Path | None = None

    def output(self) -> str:
        """What it printed so far."""
        return self.log.read_text(errors="replace") if self.log is not None else ""

    @property
    def addr(self) -> tuple[str, int]:
        """Where it listens."""
        return ("127.0.0.1", self.port)


def deployment_repo(root: Path) -> Path:
    """A one-commit git repository tagged v1 with ``h/compose.yaml``."""
    (root / "h").mkdir(parents=True)
    (root / "h" / "compose.yaml").write_text("services:\n  a:\n    image: busybox\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"], ["tag", "v1"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, env=env, capture_output=True)
    return root


_STUB_COMPOSE = """#!{python}
# A stand-in for docker compose: answers `version --short` as v2 does, prints a container for
# `ps`, a line for anything else, and never touches a Docker engine.
import json, sys
args = sys.argv[1:]
if "version" in args:
    print("2.40.3")
elif "ps" in args:
    print(json.dumps({{"Service": "a", "Name": "h-a-1", "State": "running"}}))
else:
    print("stub compose ran with", len(args), "arguments")
"""


def stub_compose(folder: Path) -> Path:
    """A compose stand-in script in ``folder`` (for a fuzzer that must not run compose)."""
    path = folder / "stub-compose"
    path.write_text(_STUB_COMPOSE.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _argv(
    kind: str, work: Path, timeouts: tuple[str, ...], stub: bool
) -> tuple[list[str], tuple[Path, ...]]:
    """The command line of one kind, and the folders it may write."""
    tierctl = [sys.executable, "-m", "tierctl"]
    if kind == "agent":
        repo = deployment_repo(work / "repo")
        state = work / "state"
        argv = [*tierctl, "agent", "serve", "--projects-dir", str(repo), "--state-dir",
                str(state), "--listen", "127.0.0.1:0", "--max-body-kib", "64", *timeouts]  # fmt: skip
        if stub:
            argv += ["--compose-binary", str(stub_compose(work))]
        return argv, (state,)
    if kind == "judge":
        prom = f"http://reader:{PROM_PASSWORD}@127.0.0.1:9"  # nothing listens on port 9
        argv = [*tierctl, "judge", "serve", "--spec", str(SPEC), "--prometheus", prom,
                "--listen", "127.0.0.1:0", *timeouts]  # fmt: skip
        return argv, ()
    sim = [*tierctl, "sim", "serve", "--time-scale", "1000", "--max-body-mib", "4", *timeouts]
    if kind == "sim-vllm":
        engine = ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "0",
                  "--max-model-len", "20000"]  # fmt: skip
        return [*sim, "--", *engine], ()
    engine = ["--host", "127.0.0.1", "--port", "0", "--max-total-tokens", "20000",
              "--enable-metrics"]  # fmt: skip
    return [*sim, "--", *engine], ()


@contextlib.contextmanager
def serve(
    kind: str,
    work: Path,
    *,
    header_timeout_s: float = 1.0,
    body_timeout_s: float = 2.0,
    stub_compose: bool = False,
) -> Iterator[Served]:
    """Start one server of ``kind`` with ``work`` as its folder; stopped on exit. The agent
    runs the real compose binary, or with ``stub_compose`` a stand-in."""
    work.mkdir(parents=True, exist_ok=True)
    timeouts = ("--header-timeout-s", f"{header_timeout_s:g}",
                "--body-timeout-s", f"{body_timeout_s:g}")  # fmt: skip
    argv, writable = _argv(kind, work, timeouts, stub_compose)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TIERCTL_AGENT_TOKEN": AGENT_TOKEN}
    env["VLLM_SERVER_DEV_MODE"] = "1"  # vLLM's every route (the simulator's too)
    log = work / "server.log"
    with log.open("wb") as sink:
        # To a file, not a pipe: a pipe nobody reads fills up and stops the server.
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT)
    served = Served(kind, 0, proc, writable, (AGENT_TOKEN, PROM_PASSWORD), log)
    try:
        served.port = _announced_port(proc, log)
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _announced_port(proc: subprocess.Popen[bytes], log: Path) -> int:
    """The port a server prints when it listens (120 s at most: a loaded machine)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = _ANNOUNCED.search(log.read_text(errors="replace"))
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"the server never said where it listens: {log.read_text()}")


def rss_kib(pid: int) -> int:
    """The process's resident set size now (``/proc/PID/status`` VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def hwm_kib(pid: int) -> int:
    """The process's peak resident set size so far (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
