"""``tierctl judge serve`` over HTTP: Argo Rollouts' web metric provider and Flagger's
webhook request shapes, answered from a real Prometheus holding two engines' metrics (the
profile's names, backfilled): a worse canary fails, an equal one passes, an unreachable
Prometheus is inconclusive (never a pass), a bad window is a 400."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import backfilled_prometheus, needs_prometheus
from tierctl.readout.judge_server import JudgeSettings, judge_app
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec_text, resolve_tier

pytestmark = [needs_prometheus, pytest.mark.integration, pytest.mark.slow]

END_S = 1_767_225_600
START_S = END_S - 3 * 3600
ARMS = [
    ArmData("svc-r1", "tier-pdi1"),
    ArmData("svc-r2", "tier-pdi2", ttft_x=1.4),
    ArmData("svc-r3", "tier-pdi3"),
]
SPEC = (
    "tier: t\nhost: t\noutput: c.yaml\n"
    "engine: {kind: sglang, version: 0.5.23, service: 'svc-{replica}',\n"
    "  image: 'x/y@sha256:" + "a" * 64 + "', args: {prefill-decode-interval: 1}}\n"
    "replicas:\n  r1: {gpus: [0], role: control}\n"
    "  r2: {gpus: [1], role: canary, args: {prefill-decode-interval: 2}}\n"
    "  r3: {gpus: [2], args: {prefill-decode-interval: 3}}\n"
    "telemetry: {variant: 'tier-pdi{prefill-decode-interval}', places: [service-labels]}\n"
)
#: Flagger's webhook payload (docs: webhooks), the window in its metadata.
FLAGGER = {
    "name": "sglang-qwen",
    "namespace": "llm",
    "phase": "Progressing",
    "checksum": "85d557f47b",
    "metadata": {"window": "150m"},
}


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with backfilled_prometheus(
        tmp_path_factory.mktemp("prom"), openmetrics(ARMS, START_S, END_S)
    ) as url:
        yield url


async def _serve(prometheus: str, canary: str | None = None) -> AsyncIterator[str]:
    from aiohttp.test_utils import TestServer

    settings = JudgeSettings(
        prometheus=prometheus, window_s=9000, step_s=300, canary=canary, now=lambda: END_S
    )
    server = TestServer(
        judge_app(resolve_tier(load_spec_text(SPEC, "tier.yaml")), settings),
        host="127.0.0.1",
        port=free_port(),
    )
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()


async def _call(method: str, url: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.request(method, url, **kw) as resp:
        return resp.status, await resp.json()


async def test_a_worse_canary_fails_for_argo_and_for_flagger(prom_url: str) -> None:
    async for base in _serve(prom_url):
        status, doc = await _call("GET", f"{base}/argo?window=150m")
        assert status == 200
        assert doc["verdict"] == "fail"
        assert (doc["control"]["replica"], doc["canary"]["replica"]) == ("r1", "r2")
        # Argo's POST form (body: a JSON string the template writes).
        status, posted = await _call("POST", f"{base}/argo", json={"window": "150m"})
        assert (status, posted["verdict"]) == (200, "fail")
        status, doc = await _call("POST", f"{base}/flagger", json=FLAGGER)
        assert status == 409  # Flagger halts on anything but 2xx
        assert doc["verdict"] == "fail"
        assert doc["phase"] == "Progressing"


async def test_an_equal_canary_passes(prom_url: str) -> None:
    async for base in _serve(prom_url, canary="r3"):
        status, doc = await _call("POST", f"{base}/flagger", json=FLAGGER)
        assert (status, doc["verdict"]) == (200, "pass"), doc
        status, doc = await _call("GET", f"{base}/argo?window=150m")
        assert (status, doc["verdict"]) == (200, "pass")


async def test_an_unreachable_prometheus_is_inconclusive_never_a_pass() -> None:
    async for base in _serve(f"http://127.0.0.1:{free_port()}"):
        status, doc = await _call("GET", f"{base}/argo")
        assert (status, doc["verdict"]) == (200, "inconclusive")
        assert doc["reasons"]
        status, doc = await _call("POST", f"{base}/flagger", json=FLAGGER)
        assert (status, doc["verdict"]) == (503, "inconclusive")


async def test_a_bad_window_is_a_400_naming_it(prom_url: str) -> None:
    async for base in _serve(prom_url):
        status, doc = await _call("GET", f"{base}/argo?window=soon")
        assert status == 400
        assert "'soon'" in doc["error"]
        status, _ = await _call("GET", f"{base}/healthz")
        assert status == 200


def test_the_judge_module_needs_no_server_to_import(tmp_path: Path) -> None:
    assert JudgeSettings(prometheus="http://x").window_s == 1800.0
