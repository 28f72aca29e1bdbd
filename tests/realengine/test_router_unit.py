"""The router launcher's command, its reading back, and the counters parser (no router run)."""

from __future__ import annotations

import pytest

from tierctl.errors import InputError
from tierctl.proxies.sglang_router import (
    HealthChecks,
    RouterSettings,
    parse_counters,
    router_argv,
    settings_from_argv,
)


def test_argv_carries_workers_and_health_settings() -> None:
    s = RouterSettings(
        worker_urls=("http://127.0.0.1:1", "http://127.0.0.1:2"),
        port=9000,
        metrics_port=9001,
        health=HealthChecks(interval_s=5, timeout_s=3, failure_threshold=4),
    )
    argv = router_argv(s, "/x/sglang-router")
    assert argv[:2] == ["/x/sglang-router", "launch"]
    i = argv.index("--worker-urls")
    assert argv[i + 1 : i + 3] == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    for flag, value in (
        ("--health-check-interval-secs", "5"),
        ("--health-check-timeout-secs", "3"),
        ("--health-failure-threshold", "4"),
        ("--port", "9000"),
        ("--prometheus-port", "9001"),
        ("--host", "127.0.0.1"),
    ):
        assert argv[argv.index(flag) + 1] == value


def test_argv_round_trips_through_settings_from_argv() -> None:
    s = RouterSettings(
        worker_urls=("http://a:1", "http://b:2"),
        port=8000,
        metrics_port=8001,
        policy="random",
        health=HealthChecks(interval_s=7, timeout_s=2, failure_threshold=5, success_threshold=2),
        retries=3,
        extra=("--request-timeout-secs", "30"),
    )
    assert settings_from_argv(router_argv(s)) == s


def test_rendered_command_with_comma_joined_urls_and_equals_syntax() -> None:
    s = settings_from_argv(
        [
            "sglang-router",
            "launch",
            "--worker-urls=http://a:1,http://b:2",
            "--health-check-timeout-secs=3",
            "--cache-threshold",
            "0.5",
        ]
    )
    assert s.worker_urls == ("http://a:1", "http://b:2")
    assert s.health.timeout_s == 3
    assert s.extra == ("--cache-threshold", "0.5")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sglang-router", "--worker-urls", "http://a:1"], "launch"),
        (["sglang-router", "launch", "--port", "80"], "--worker-urls"),
        (["sglang-router", "launch", "--worker-urls", "u", "--port", "x"], "integer"),
    ],
)
def test_bad_commands_are_refused_with_the_rule(argv: list[str], needle: str) -> None:
    with pytest.raises(InputError) as err:
        settings_from_argv(argv)
    assert needle in err.value.format()


def test_counters_parse_the_routers_exposition() -> None:
    text = "\n".join(
        [
            "# HELP smg_http_responses_total x",
            'smg_http_responses_total{status_code="200",error_code=""} 7',
            'smg_http_responses_total{status_code="502",error_code="x"} 2',
            'smg_http_responses_total{status_code="503",error_code="y"} 1',
            'smg_http_requests_total{method="POST",path="/v1/completions"} 9',
            'smg_worker_health_checks_total{worker_type="regular",result="success"} 4',
            'smg_worker_health_checks_total{worker_type="regular",result="failure"} 1',
            'smg_worker_health{worker="http://127.0.0.1:1"} 1',
            'smg_worker_health{worker="http://127.0.0.1:2"} 0',
        ]
    )
    c = parse_counters(text)
    assert c.responses == {"200": 7.0, "502": 2.0, "503": 1.0}
    assert c.errors() == 3.0
    assert c.requests["/v1/completions"] == 9.0
    assert c.health_checks == {"success": 4.0, "failure": 1.0}
    assert c.worker_health == {"http://127.0.0.1:1": 1.0, "http://127.0.0.1:2": 0.0}
    later = parse_counters(text.replace("} 7", "} 10"))
    assert later.minus(c).responses["200"] == 3.0
    assert later.minus(c).errors() == 0.0
