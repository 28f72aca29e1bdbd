"""The compose-manager driver tells a host that never answered (HostUnreachable: the executor
may re-run the step on resume) from one that answered with a failure (RuntimeFailure)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tierctl.errors import RuntimeFailure
from tierctl.rollout.drivers.base import HostUnreachable
from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver, Target

BODY = {"tag": "v2", "file": "c.yaml", "services": ["r1"], "env": {}, "volumes": False}


def _driver(answers: list[Callable[[httpx.Request], httpx.Response]]) -> ComposeManagerDriver:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":  # the driver asks once whether streams beat
            return httpx.Response(200, json={"status": "ok", "heartbeat_s": 5})
        return answers.pop(0)(request)

    return ComposeManagerDriver(
        "http://10.0.0.2:8765", "tok", {"new": Target("v2", "c.yaml")},
        transport=httpx.MockTransport(handler), sleep=lambda _s: None, attempts=3,
    )  # fmt: skip


def _refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 113] No route to host", request=request)


def _timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def _busy(_request: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json={"error": "busy with operation abc"})


def test_no_answer_to_any_try_is_host_unreachable() -> None:
    driver = _driver([_refused, _timeout, _refused])
    with pytest.raises(HostUnreachable) as info:
        driver._call("/compose/down", BODY, idempotent=True)
    assert "failed 3 times" in info.value.message
    assert "the agent at http://10.0.0.2:8765 never answered" in info.value.message
    assert "does its address answer from here" in (info.value.fix or "")


@pytest.mark.parametrize(
    "answers",
    [
        [_busy, _refused, _refused],  # it answered once (busy), then went away
        [_refused, _refused, lambda _r: httpx.Response(500)],
        [lambda _r: httpx.Response(200, text="<html>proxy</html>")] * 3,  # a 200 of no events
    ],
)
def test_an_answer_to_any_try_is_an_ordinary_failure(
    answers: list[Callable[[httpx.Request], httpx.Response]],
) -> None:
    """Mutation guard: a host that answered (a 409, a 500, a page) is reachable; its
    failure is the usual one, rolled back and not re-run on resume."""
    with pytest.raises(RuntimeFailure) as info:
        _driver(list(answers))._call("/compose/down", BODY, idempotent=True)
    assert not isinstance(info.value, HostUnreachable)
    assert "never answered" not in info.value.message


def test_a_host_that_answered_no_try_is_tried_once_per_call_until_it_answers() -> None:
    """The rollback after a step its host never answered: one more try, not another round
    (a cut host halts its fleet in seconds after the step's own tries, #37)."""
    ok = lambda _r: httpx.Response(200, text='{"type": "exit", "code": 0}\n')  # noqa: E731
    answers = [_refused, _refused, _refused, _refused, ok, _refused, _refused, ok]
    driver = _driver(answers)
    with pytest.raises(HostUnreachable, match="failed 3 times"):
        driver._call("/compose/down", BODY, idempotent=True)
    with pytest.raises(HostUnreachable, match="it answered no try of the call before"):
        driver._call("/compose/down", BODY, idempotent=True)
    assert len(answers) == 4
    driver._call("/compose/down", BODY, idempotent=True)  # it answers again
    driver._call("/compose/down", BODY, idempotent=True)  # the full round of tries again
    assert answers == []
