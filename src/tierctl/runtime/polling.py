"""One polling loop: ask a condition until it holds or a deadline passes.

Every wait tierctl does on something outside it (a server becoming ready, a process group
exiting, a worker turning healthy, a metric showing a new variant) is this loop; the clock and
the sleep are passed in so that tests drive it without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
    deadline = clock() + timeout_s
    while True:
        if condition():
            return True
        left = deadline - clock()
        if left <= 0:
            return False
        sleep(min(poll_s, left))
