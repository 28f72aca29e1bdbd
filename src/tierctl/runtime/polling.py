"""One polling loop: ask a condition until it holds or a deadline passes.

Every wait tierctl does on something outside it (a server becoming ready, a process group
exiting, a worker turning healthy, a metric showing a new variant) is this loop; the clock and
the sleep are passed in so that tests drive it without waiting. :func:`wait_until` pauses with
a blocking sleep; :func:`wait_until_async` is the same loop for code on an event loop (it
awaits its sleep, so the loop keeps serving while it waits). Both are driven by
:func:`_pauses`, the one place the deadline is kept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator


def _pauses(
    condition: Callable[[], bool], timeout_s: float, poll_s: float, clock: Callable[[], float]
) -> Generator[float, None, bool]:
    """The deadline loop: yields each pause to take; returns whether ``condition`` held."""
    deadline = clock() + timeout_s
    while True:
        if condition():
            return True
        left = deadline - clock()
        if left <= 0:
            return False
        yield min(poll_s, left)


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    *,
    poll_s: float = 0.1,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Call ``condition`` until it returns true (then True) or ``timeout_s`` has passed (then
    False). It is asked at least once, and once more at the deadline: a wait never gives up
    without a last look. Each pause is ``poll_s``, cut short so as not to overrun the deadline.
    """
    pauses = _pauses(condition, timeout_s, poll_s, clock)
    while True:
        try:
            pause = next(pauses)
        except StopIteration as done:
            return bool(done.value)
        sleep(pause)


async def wait_until_async(
    condition: Callable[[], bool],
    timeout_s: float,
    *,
    poll_s: float = 0.1,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """:func:`wait_until` on an event loop: the same asks and pauses, each pause awaited."""
    pauses = _pauses(condition, timeout_s, poll_s, clock)
    while True:
        try:
            pause = next(pauses)
        except StopIteration as done:
            return bool(done.value)
        await sleep(pause)
