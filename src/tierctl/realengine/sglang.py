"""The real SGLang 0.5.23 on CPU serving the tiny model: its virtualenv, environment and process.

``scripts/ensure-sglang`` makes the virtualenv (SGLang with ``--no-deps`` and the requirements
CPU text serving imports, torch 2.14.1, ``sglang-router``) at a cache path keyed by the pinned
versions; :func:`sglang_python` finds it without installing anything, :func:`ensure_sglang` runs
the script. :class:`SglangEngine` is one ``python -m sglang.launch_server`` on a loopback port
as a :class:`~tierctl.runtime.process.ServerProcess` (started, probed until ``/health`` answers,
stopped by its process group).

What runs is SGLang's own code end to end -- HTTP server, tokenizer manager, scheduler (chunked
prefill, radix cache, ``--prefill-decode-interval``), detokenizer, its Llama model and the
``torch_native`` attention backend on CPU -- with one stand-in: the package ``sgl_kernel``, whose
CPU build is not published, is tierctl's :mod:`tierctl.realengine.sglang_cpu.sgl_kernel` (two
bookkeeping ops in torch; put first on the engine's ``PYTHONPATH``). The flags and environment a
CPU host needs are the profile's (:data:`tierctl.engines.sglang.CPU_HOST_FLAGS`,
:data:`~tierctl.engines.sglang.CPU_HOST_ENV`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tierctl.engines.sglang import CPU_HOST_ENV, CPU_HOST_FLAGS, LAUNCH_MODULE
from tierctl.errors import RuntimeFailure
from tierctl.realengine import env as realenv
from tierctl.realengine.engine import LocalEngine
from tierctl.runtime.process import ServerProcess, free_port

SGLANG_VERSION = "0.5.23"
TORCH_VERSION = "2.14.1"
ROUTER_VERSION = realenv.ROUTER_VERSION
#: scripts/ensure-sglang's RECIPE: bumped there when its package list changes.
RECIPE = "1"
SERVED_NAME = "tiny-llama"
#: The folder put first on the engine's PYTHONPATH: it holds the ``sgl_kernel`` stand-in.
SHIM_DIR = Path(__file__).resolve().with_name("sglang_cpu")
#: Flags every tiny-model SGLang gets after the CPU host's; a caller's flags come after them.
#: float32 as the model is made (SGLang's ``auto`` would run it in float16); the KV cache is
#: capped at 65,536 tokens (256 MiB at float32 for this model) instead of a fraction of the
#: host's memory, which the machine's other engines share.
BASE_FLAGS = (
    "--dtype",
    "float32",
    "--max-total-tokens",
    "65536",
    "--mem-fraction-static",
    "0.1",
)


def venv_dir() -> Path:
    """The engine's virtualenv: ``$TIERCTL_SGLANG_VENV`` or the versioned cache path."""
    explicit = os.environ.get("TIERCTL_SGLANG_VENV")
    if explicit:
        return Path(explicit)
    name = f"sglang-{SGLANG_VERSION}-t{TORCH_VERSION}-r{ROUTER_VERSION}"
    return realenv.cache_root() / name


def _stamp(venv: Path) -> Path:
    return venv / (
        f".tierctl-installed-sglang-{SGLANG_VERSION}-torch-{TORCH_VERSION}"
        f"-sglang-router-{ROUTER_VERSION}-recipe-{RECIPE}"
    )


def sglang_python() -> Path | None:
    """The engine virtualenv's python when the install finished; ``None`` otherwise."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    return python if python.exists() and _stamp(venv).exists() else None


def ensure_script() -> Path | None:
    """``scripts/ensure-sglang`` of a source checkout, when tierctl runs from one."""
    script = Path(__file__).resolve().parents[3] / "scripts" / "ensure-sglang"
    return script if script.is_file() else None


def ensure_sglang() -> Path:
    """The engine's python, installing the virtualenv first when it is missing.

    Raises:
        RuntimeFailure: no install and no ``scripts/ensure-sglang`` to make one, or it failed.
    """
    found = sglang_python()
    if found is not None:
        return found
    script = ensure_script()
    if script is None:
        raise RuntimeFailure(
            f"SGLang {SGLANG_VERSION} is not installed at {venv_dir()}",
            rule="the real engine runs from its own virtualenv",
            fix="run scripts/ensure-sglang from a tierctl checkout, or set TIERCTL_SGLANG_VENV",
        )
    result = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=False)
    found = sglang_python()
    if result.returncode != 0 or found is None:
        raise RuntimeFailure(
            f"scripts/ensure-sglang failed (status {result.returncode})",
            rule="the real engine runs from its own virtualenv",
            fix="read its output above; it needs the package index and ~7 GB of disk",
        )
    return found


def engine_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment SGLang runs with: offline (no hub, ever), its CPU platform, and the
    ``sgl_kernel`` stand-in first on ``PYTHONPATH`` (every SGLang subprocess inherits it)."""
    env = realenv.engine_env(dict(os.environ if base is None else base))
    env.update(CPU_HOST_ENV)
    env["PYTHONPATH"] = str(SHIM_DIR)
    return env


def engine_argv(
    python: Path, model: Path, port: int, flags: Sequence[str] = (), host: str = "127.0.0.1"
) -> list[str]:
    """The command of one engine: launcher, model, address, CPU flags, base flags, ``flags``."""
    return [
        str(python),
        "-m",
        LAUNCH_MODULE,
        "--model-path",
        str(model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        host,
        "--port",
        str(port),
        *CPU_HOST_FLAGS,
        *BASE_FLAGS,
        *flags,
    ]


class SglangEngine(LocalEngine):
    """An SGLang server process on a loopback port; a context manager that always stops it."""

    def __init__(
        self,
        log: Path,
        *,
        flags: Sequence[str] = (),
        port: int = 0,
        python: Path | None = None,
        model: Path | None = None,
        name: str = "sglang",
        die_with_parent: bool = True,
    ) -> None:
        """Prepare an engine (nothing starts until :meth:`start`).

        Args:
            log: Its output (API server, scheduler and detokenizer together).
            flags: Extra SGLang flags (``--enable-metrics``, ``--prefill-decode-interval 2``).
            port: Listen port; 0 picks a free one.
            python: The engine virtualenv's python (default: found or installed).
            model: The model folder (default: the tiny model, made when missing).
            name: For messages.
            die_with_parent: Stop when the process that started it dies (tests: no orphan
                engines after a killed pytest).
        """
        self.python = python or ensure_sglang()
        self.model = model or realenv.tiny_model(self.python)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.argv = engine_argv(self.python, self.model, self.port, flags)
        self.process = ServerProcess(
            self.argv, log, env=engine_env(), name=name, die_with_parent=die_with_parent
        )
