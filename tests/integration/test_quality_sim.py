"""The quality lane against two `sim serve` arms: at the floor with the same model, above it
(with the count the simulated model's ground truth says) with a perturbed arm."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from tierctl.bench.quality.items import arithmetic, generated_texts
from tierctl.bench.quality.lane import TEACHER_FORCED, run_quality
from tierctl.bench.quality.spec import PasskeySpec, QualitySpec, TeacherForcedSpec
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import preset
from tierctl.sim.lm import SimLM, model_seed
from tierctl.sim.server import ServeOptions, SimServer
from tierctl.sim.tokenizer import load_tokenizer

pytestmark = pytest.mark.integration

MODEL = "/models/tiny-sim"
SPEC = QualitySpec(
    teacher_forced=TeacherForcedSpec(count=20, tokens=60),
    passkey=PasskeySpec(lengths=(200, 600), per_length=3),
    arithmetic=20,
    max_tokens=8,
)


async def _server(**opts: Any) -> TestServer:
    config = EngineConfig.from_argv(["--model-path", MODEL, "--port", "0", "--enable-metrics"])
    server = SimServer(config, preset("dense-8b-h100"), ServeOptions(time_scale=1000.0, **opts))
    ts = TestServer(server.app(), host="127.0.0.1")
    await ts.start_server()
    return ts


def _url(ts: TestServer) -> str:
    return str(ts.make_url("")).rstrip("/")


@pytest.fixture
async def arms() -> AsyncIterator[dict[str, str]]:
    servers = {
        "a": await _server(),
        "same": await _server(),
        "perturbed": await _server(perturb_fraction=0.02, perturb_seed=5),
    }
    yield {k: _url(v) for k, v in servers.items()}
    for ts in servers.values():
        await ts.close()


def _ids(text: str) -> list[int]:
    return list(load_tokenizer().encode(text, add_special_tokens=False).ids)


def _truth_text_differs(lm_b: SimLM) -> int:
    """Texts where the perturbed model's greedy choice differs at some position."""
    texts = generated_texts(SPEC.teacher_forced.count, SPEC.teacher_forced.tokens, SPEC.seed)
    return sum(
        any(p is not None and p.perturbed for p in lm_b.teacher_forced(_ids(t.text))) for t in texts
    )


def _truth_arith_differs(lm_a: SimLM, lm_b: SimLM) -> int:
    items = arithmetic(SPEC.arithmetic, SPEC.seed)
    return sum(
        lm_a.generate(_ids(i.prompt), SPEC.max_tokens)
        != lm_b.generate(_ids(i.prompt), SPEC.max_tokens)
        for i in items
    )


@pytest.mark.parametrize("engine", ["auto", "vllm", "sglang"])
async def test_same_model_is_at_the_noise_floor(arms: dict[str, str], engine: str) -> None:
    spec = SPEC.model_copy(update={"engine": engine})
    result = await run_quality(arms["a"], arms["same"], spec)
    assert result.verdict == "at the noise floor"
    assert result.errors == ()
    assert [lane.lane for lane in result.lanes] == [
        TEACHER_FORCED,
        "passkey@200",
        "passkey@600",
        "arithmetic",
    ]
    for lane in result.lanes:
        assert lane.test.differ == 0
        assert lane.test.floor == 0
        assert not lane.test.above
    tf = result.lanes[0]
    assert tf.token_agreement["A-B"][0] == 1.0
    assert tf.max_gap["A-B"][0] == 0.0
    if engine == "auto":
        assert result.engines == {"A": "sglang", "B": "sglang"}  # sglang: metrics


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_perturbed_arm_is_above_the_floor_with_the_right_count(
    arms: dict[str, str], engine: str
) -> None:
    spec = SPEC.model_copy(update={"engine": engine})
    result = await run_quality(arms["a"], arms["perturbed"], spec)
    lm_a = SimLM(model_seed(MODEL))
    lm_b = SimLM(model_seed(MODEL), perturb_fraction=0.02, perturb_seed=5)
    want_texts = _truth_text_differs(lm_b)
    want_arith = _truth_arith_differs(lm_a, lm_b)
    assert 0 < want_texts < SPEC.teacher_forced.count  # the knob perturbs some, not all
    lanes = {lane.lane: lane for lane in result.lanes}
    tf = lanes[TEACHER_FORCED]
    assert tf.test.differ == want_texts
    assert tf.test.floor == 0
    assert tf.test.above
    assert tf.verdict == f"above the floor: {want_texts} items differ"
    assert tf.token_agreement["A-B"][0] < 1.0
    assert tf.token_agreement["A-A'"][0] == 1.0
    assert tf.max_gap["A-B"][0] > 0.0
    assert lanes["arithmetic"].test.differ == want_arith
    assert result.verdict.startswith("above the floor: ")
    assert TEACHER_FORCED in result.verdict


async def test_without_the_floor_pass_the_floor_is_zero(arms: dict[str, str]) -> None:
    spec = SPEC.model_copy(update={"floor": False, "arithmetic": 0, "passkey": PasskeySpec()})
    result = await run_quality(arms["a"], arms["same"], spec)
    assert result.passes == ("A", "B")
    assert not result.floor_measured
    assert result.lanes[0].floor_texts == ()
    assert result.verdict == "at the noise floor"


async def test_a_dead_arm_is_reported_not_a_crash(arms: dict[str, str]) -> None:
    spec = SPEC.model_copy(
        update={"arithmetic": 2, "passkey": PasskeySpec(), "timeout_s": 10.0,
                "teacher_forced": TeacherForcedSpec(count=2, tokens=20), "engine": "vllm"}
    )  # fmt: skip
    result = await run_quality(arms["a"], "http://127.0.0.1:9", spec)
    assert len(result.errors) == 4
    assert all(e.startswith("B ") for e in result.errors)
    for lane in result.lanes:
        assert lane.test.differ == lane.items


async def test_a_vllm_sim_is_detected_and_scored_with_prompt_logprobs() -> None:
    argv = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--port", "0"]
    servers = []
    for opts in ({}, {"perturb_fraction": 0.02, "perturb_seed": 5}):
        server = SimServer(
            EngineConfig.from_argv(argv),
            preset("dense-8b-h100"),
            ServeOptions(time_scale=1000.0, **opts),  # type: ignore[arg-type]
        )
        ts = TestServer(server.app(), host="127.0.0.1")
        await ts.start_server()
        servers.append(ts)
    try:
        spec = SPEC.model_copy(update={"passkey": PasskeySpec(), "arithmetic": 0})
        result = await run_quality(_url(servers[0]), _url(servers[1]), spec)
    finally:
        for ts in servers:
            await ts.close()
    assert result.engines == {"A": "vllm", "B": "vllm"}
    lm_b = SimLM(model_seed(MODEL), perturb_fraction=0.02, perturb_seed=5)
    assert result.lanes[0].test.differ == _truth_text_differs(lm_b)


async def test_detection_falls_back_to_server_info_then_the_default_engine() -> None:
    import aiohttp

    from tierctl.bench.quality.lane import detect_profile
    from tierctl.engines import default_profile

    config = EngineConfig.from_argv(["--model-path", MODEL, "--port", "0"])  # no metrics
    ts = TestServer(
        SimServer(config, preset("dense-8b-h100"), ServeOptions(time_scale=1000.0)).app(),
        host="127.0.0.1",
    )
    await ts.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            assert (await detect_profile(session, _url(ts))).kind == "sglang"
            unreachable = await detect_profile(session, "http://127.0.0.1:9")
            assert unreachable is default_profile()
    finally:
        await ts.close()
