"""An engine's identity and log between two marks: what the soak gate and the health lane share."""

from __future__ import annotations

import httpx
import pytest

from tierctl.engines import profile_for
from tierctl.engines.liveness import (
    LivenessMark,
    liveness_mark,
    liveness_problems,
    log_matches,
    metrics_start_time,
)


def _client(text: str, status: int = 200) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda _r: httpx.Response(status, text=text)))


def test_the_start_time_is_read_from_metrics_and_a_lookalike_name_is_not() -> None:
    text = (
        "process_start_time_seconds_total 1.0\n"  # a longer name: not the start time
        'process_start_time_seconds{pid="7"} 1712.5\n'
    )
    assert metrics_start_time(_client(text), "http://e/") == "1712.5"
    assert metrics_start_time(_client("other 1\n"), "http://e") is None
    assert metrics_start_time(_client(text, status=503), "http://e") is None


def test_an_unreachable_engine_has_no_start_time() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    assert metrics_start_time(client, "http://e") is None


def test_log_matches_split_fatal_lines_from_warnings() -> None:
    log = "ok\nTraceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory\n"
    fatal, warnings = log_matches(profile_for("sglang"), log)
    assert [name for name, _ in fatal] == ["cuda-oom"]
    assert [name for name, _ in warnings] == ["traceback"]


def test_a_restart_between_two_marks_is_a_problem() -> None:
    assert liveness_problems(LivenessMark("1", None, None), LivenessMark("2", None, None)) == [
        "restarted (process start time 1 -> 2)"
    ]
    assert liveness_problems(LivenessMark("1", None, None), LivenessMark("1", None, None)) == []
    # an unreadable start time on either side proves nothing
    assert liveness_problems(LivenessMark(None, None, None), LivenessMark("2", None, None)) == []


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_only_fatal_lines_logged_after_the_first_mark_count(engine: str) -> None:
    old = "NCCL error: old\n"
    before = LivenessMark("1", len(old), old)
    new = old + "Traceback (most recent call last):\nfine\n"
    assert liveness_problems(before, LivenessMark("1", len(new), new), profile_for(engine)) == []
    bad = new + "NCCL error: unhandled system error\n"
    problems = liveness_problems(before, LivenessMark("1", len(bad), bad), profile_for(engine))
    assert problems == ["fatal log line [nccl] NCCL error: unhandled system error"]


def test_a_replaced_log_is_read_from_its_start() -> None:
    before = LivenessMark("1", 10_000, None)  # the old container's log was long
    after = LivenessMark("1", 20, "NCCL error: boom\n")
    assert liveness_problems(before, after) == ["fatal log line [nccl] NCCL error: boom"]


def test_a_mark_reads_the_start_time_and_the_log_so_far() -> None:
    mark = liveness_mark(_client("process_start_time_seconds 5\n"), "http://e", lambda: "abc")
    assert mark == LivenessMark("5", 3, "abc")
    assert liveness_mark(_client(""), None, None) == LivenessMark(None, None, None)
