"""The vLLM profile's running-argv check against a real vLLM (CPU) engine: its startup log's
`non-default args`, /v1/models and vllm:cache_config_info are what the profile expects."""

from __future__ import annotations

import httpx
import pytest

from tests.realengine.fixtures import EnginePair
from tierctl.engines import VLLM
from tierctl.realengine.env import VLLM_MODULE

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]


def _fetch(base: str):  # type: ignore[no-untyped-def]
    def fetch(path: str) -> tuple[int, str]:
        try:
            resp = httpx.get(base + path, timeout=10)
        except httpx.HTTPError:
            return (0, "")
        return (resp.status_code, resp.text)

    return fetch


def test_a_real_vllm_confirms_its_rendered_flags(vllm_pair: EnginePair) -> None:
    r1 = vllm_pair.r1
    # The argv the local driver started r1 with (r1 is never recreated by the other tests).
    argv = [str(a) for a in r1.tier.driver.state()[r1.tier.service("r1")]["argv"]]
    assert VLLM.matches_command(argv)
    assert VLLM_MODULE in argv
    log = r1.log.read_text(errors="replace")
    check = VLLM.verify_running_args(argv, _fetch(r1.url), log)  # type: ignore[attr-defined]
    assert check.ok, check
    assert check.method.startswith("startup log + /v1/models"), check.method
    assert check.unverifiable == ()
    assert {"max-num-seqs", "max-model-len", "served-model-name", "enforce-eager"} <= set(
        check.verified
    )
    # The same engine does not confirm a flag it was not started with.
    at = argv.index("--max-num-seqs")
    wrong = [*argv[: at + 1], "16", *argv[at + 2 :]]
    bad = VLLM.verify_running_args(wrong, _fetch(r1.url), log)  # type: ignore[attr-defined]
    assert bad.mismatches == ("--max-num-seqs: rendered 16, engine parsed 8",)


def test_a_real_vllm_exports_the_profiles_metric_names(vllm_pair: EnginePair) -> None:
    text = httpx.get(vllm_pair.r1.url + VLLM.metrics_path, timeout=10).text  # type: ignore[attr-defined]
    names = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"
    }
    for role, family in VLLM.families().items():
        if role in ("aborted", "finished", "preemptions", "kv_cache_usage"):
            continue  # counters by label, checked below; optional gauges
        if role.startswith("spec_"):
            continue  # exported only by an engine running speculative decoding (test_spec_accept_real)
        assert VLLM.prefix + family in names, (role, family)
    assert VLLM.prefix + VLLM.metrics.finished.name in names
