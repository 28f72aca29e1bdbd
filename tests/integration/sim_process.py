"""One `tierctl sim serve` subprocess on a free loopback port, for the async integration tests."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def sim_process(
    command: Sequence[str], *, time_scale: float = 5.0, env: dict[str, str] | None = None
) -> AsyncIterator[str]:
    """`tierctl sim serve --time-scale X -- COMMAND`; yields its base URL; always stopped.

    ``command`` is the engine command it answers as (flags only: SGLang; ``vllm serve ...``:
    vLLM) and must bind port 0 on loopback.
    """
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(time_scale),
        "--", *command,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=full,
    )  # fmt: skip
    drain: asyncio.Task[bytes] | None = None
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, f"the simulated engine exited: {''.join(seen)}"
            seen.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            url = m.group(1) if m else None
        # Keep draining its output so a chatty server never blocks on a full pipe.
        drain = asyncio.create_task(proc.stdout.read())
        yield url
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if drain is not None:
            await drain
