"""Argv parsed into flags, and flag-level differences."""

from __future__ import annotations

from tierctl.rollout.argv import diff_argv, parse_argv

LAUNCH = ["python3", "-m", "sglang.launch_server"]


def test_launcher_flags_bare_inline_and_multi_values() -> None:
    p = parse_argv(
        [*LAUNCH, "--port=30001", "--enable-metrics", "--cuda-graph-bs", "1", "2", "--x", "-1"]
    )
    assert p.launcher == tuple(LAUNCH)
    assert p.flags == {
        "port": "30001",
        "enable-metrics": True,
        "cuda-graph-bs": ("1", "2"),
        "x": "-1",
    }


def test_order_and_spelling_do_not_count_as_changes() -> None:
    a = [*LAUNCH, "--port", "1", "--tp-size", "4"]
    b = [*LAUNCH, "--tp-size=4", "--port", "1"]
    assert diff_argv(a, b) == ()


def test_changes_are_reported_per_flag() -> None:
    a = [*LAUNCH, "--prefill-decode-interval", "1", "--gone"]
    b = [*LAUNCH, "--prefill-decode-interval", "2", "--enable-dynamic-batch-tokenizer"]
    assert [str(c) for c in diff_argv(a, b)] == [
        "--prefill-decode-interval: 1 -> 2",
        "- --gone",
        "+ --enable-dynamic-batch-tokenizer",
    ]


def test_launcher_change_is_reported() -> None:
    changes = diff_argv([*LAUNCH, "--a", "1"], ["vllm", "serve", "--a", "1"])
    assert [c.flag for c in changes] == ["<launcher>"]


def test_double_dash_and_what_follows_stay_visible_as_positionals() -> None:
    p = parse_argv([*LAUNCH, "--a", "1", "--", "x"])
    assert p.flags == {"a": "1", "<positional:-->": True, "<positional:x>": True}
