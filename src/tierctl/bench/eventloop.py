"""The event loop load runs are driven by: uvloop when it is installed, else asyncio's own.

uvloop (libuv under asyncio's API, in the ``bench`` extra) costs less CPU per streamed request
than asyncio's selector loop (``benchmarks/client_overhead.py`` measures both side by side),
and every microsecond the client spends is a microsecond a due send can wait. The timerfd
pacer registers its fd with ``loop.add_reader``, which uvloop implements on a libuv poll
handle, so precise pacing is the same on both. Without uvloop the run still works on asyncio's
loop and :func:`fallback_note` says so in one line.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def uvloop_available() -> bool:
    """Whether uvloop can be imported here."""
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(prefer_uvloop: bool = True) -> LoopFactory:
    """``uvloop.new_event_loop`` when wanted and installed, else ``asyncio.new_event_loop``."""
    if prefer_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory: LoopFactory = uvloop.new_event_loop
            return factory
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], *, prefer_uvloop: bool = True) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` picks.

    Same behaviour as ``asyncio.run`` (a first Ctrl-C cancels ``main``, which a bench run
    turns into a partial, interrupted record), only the loop differs.
    """
    with asyncio.Runner(loop_factory=loop_factory(prefer_uvloop)) as runner:
        return runner.run(main)


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """``uvloop`` or ``asyncio``: which implementation ``loop`` (default: the running one) is."""
    loop = loop if loop is not None else asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def fallback_note() -> str | None:
    """A one-line note when runs fall back to asyncio's loop; ``None`` when uvloop is there."""
    if uvloop_available():
        return None
    return (
        "note: uvloop is not installed, so this run used asyncio's event loop (more client CPU "
        "per request); pip install -e '.[bench]' in the tierctl checkout adds it"
    )
