"""Sub-millisecond send-time pacing for asyncio.

asyncio's own timers round every wait up to the next millisecond (the selector's timeout has
1 ms resolution), so ``asyncio.sleep`` pacing alone misses a 1 ms p99 pacing error even at a
few hundred requests per second. A Linux ``timerfd`` armed with an absolute CLOCK_MONOTONIC
deadline becomes readable at that instant, and the event loop wakes on the fd instead of on
its rounded timeout. Python 3.13 has ``os.timerfd_create``; on 3.11/3.12 the same two libc
calls are made through ctypes. Elsewhere the pacer falls back to ``asyncio.sleep`` and says so
(:attr:`Pacer.precise` is ``False``).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import sys
import time
from typing import Protocol

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_CLOEXEC = 0o2000000
_TFD_NONBLOCK = 0o4000


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


class Pacer(Protocol):
    """Something that waits until an absolute ``time.monotonic()`` deadline."""

    precise: bool

    async def sleep_until(self, deadline: float) -> None:
        """Return at (not before) ``deadline``, or at once when it has passed."""

    def close(self) -> None:
        """Release any operating-system resource."""


class SleepPacer:
    """The portable fallback: ``asyncio.sleep`` with its 1 ms granularity."""

    precise = False

    async def sleep_until(self, deadline: float) -> None:
        """Sleep on the event loop's timer until ``deadline``."""
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    def close(self) -> None:
        """Nothing to release."""


class TimerfdPacer:
    """Wake on a Linux timerfd armed with an absolute monotonic deadline.

    One pacer serves one sequential sender (a lane's dispatch loop); waits never overlap.
    """

    precise = True

    def __init__(self) -> None:
        libc = _libc()
        self._settime = libc.timerfd_settime
        self._settime.argtypes = (
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(_Itimerspec),
            ctypes.c_void_p,
        )
        self._settime.restype = ctypes.c_int
        fd = int(libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd = fd
        self._spec = _Itimerspec()
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def sleep_until(self, deadline: float) -> None:
        """Arm the timer for ``deadline`` and wait for the fd to become readable."""
        if deadline <= time.monotonic():
            return
        sec = int(deadline)
        self._spec.it_value.tv_sec = sec
        self._spec.it_value.tv_nsec = max(1, int((deadline - sec) * 1e9))
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        loop = asyncio.get_running_loop()
        fired: asyncio.Future[None] = loop.create_future()
        self._waiter = fired
        if self._loop is not loop:
            # Registered once per loop, not per wait: two epoll_ctl calls per send add up.
            loop.add_reader(self._fd, self._ready)
            self._loop = loop
        try:
            await fired
        finally:
            self._waiter = None

    def _ready(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Close the timer's file descriptor."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
            self._loop = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


def make_pacer(precise: bool = True) -> Pacer:
    """A timerfd pacer on Linux when ``precise``, else the ``asyncio.sleep`` fallback."""
    if precise and sys.platform.startswith("linux"):
        try:
            return TimerfdPacer()
        except (OSError, AttributeError):
            pass
    return SleepPacer()
