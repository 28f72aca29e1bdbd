"""wait_until: the one deadline loop, driven by a fake clock (no real waiting)."""

from __future__ import annotations

from tierctl.runtime.polling import wait_until


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_it_returns_true_as_soon_as_the_condition_holds() -> None:
    clock = _Clock()
    answers = iter([False, False, True])
    assert wait_until(lambda: next(answers), 10, poll_s=1, sleep=clock.sleep, clock=clock)
    assert clock.sleeps == [1, 1]


def test_it_gives_up_at_the_deadline_after_a_last_look() -> None:
    clock = _Clock()
    looks: list[float] = []

    def never() -> bool:
        looks.append(clock.now)
        return False

    assert not wait_until(never, 2.5, poll_s=1, sleep=clock.sleep, clock=clock)
    # The last pause is cut to the deadline, and the condition is asked there once more.
    assert clock.sleeps == [1, 1, 0.5]
    assert looks == [0, 1, 2, 2.5]


def test_a_zero_timeout_still_asks_once() -> None:
    clock = _Clock()
    assert wait_until(lambda: True, 0, sleep=clock.sleep, clock=clock)
    assert not wait_until(lambda: False, 0, sleep=clock.sleep, clock=clock)
    assert clock.sleeps == []


async def test_the_async_wait_asks_and_pauses_as_the_blocking_one() -> None:
    from tierctl.runtime.polling import wait_until_async

    blocking, awaiting = _Clock(), _Clock()
    looks: list[float] = []

    async def pause(seconds: float) -> None:
        awaiting.sleep(seconds)

    def never() -> bool:
        looks.append(awaiting.now)
        return False

    assert not await wait_until_async(never, 2.5, poll_s=1, sleep=pause, clock=awaiting)
    assert not wait_until(lambda: False, 2.5, poll_s=1, sleep=blocking.sleep, clock=blocking)
    assert awaiting.sleeps == blocking.sleeps == [1, 1, 0.5]
    assert looks == [0, 1, 2, 2.5]
    answers = iter([False, True])
    assert await wait_until_async(lambda: next(answers), 10, poll_s=3, sleep=pause, clock=awaiting)
    assert awaiting.sleeps[-1] == 3
