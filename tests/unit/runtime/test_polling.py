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
