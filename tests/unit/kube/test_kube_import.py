"""``tierctl import`` of Kubernetes manifests: every corpus file with an engine becomes a
spec that loads, whose Kubernetes rendering runs the same flags replica by replica and
validates clean; secrets stay references; a literal credential is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.adopt.kubernetes import import_manifests
from tierctl.contracts.kubernetes import check_manifests
from tierctl.errors import InputError
from tierctl.kubernetes import parse_manifests
from tierctl.render.kubernetes import render_kubernetes
from tierctl.spec import resolve_tier

CORPUS = Path(__file__).resolve().parents[2] / "fixtures/kube_corpus"
#: Files whose engines a spec cannot say.
NO_ENGINE = {
    # KServe fills the image from its runtime config: imported with --engine (real_shapes).
    "18-kserve-v1alpha2-runtime.yaml",
    "20-argo-web-flagger-webhooks.yaml",  # the judge's AnalysisTemplate and Canary only
}
#: Refused, located: vLLM over Ray spans pods by its own launcher script (the spec would
#: render one pod).
REFUSED = {
    "02-lws-vllm-ray.yaml": "no multi-node launch",
    "15-lws-vllm-gpu-shell.yaml": "no multi-node launch",
    # vLLM inside Dynamo's worker: a spec starts vLLM's own server (#41).
    "07-dynamo-agg.yaml": "NVIDIA Dynamo's worker",
}
FILES = sorted(p for p in CORPUS.glob("*.yaml") if p.name not in NO_ENGINE)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_corpus_file_imports_and_round_trips(path: Path) -> None:
    if path.name in REFUSED:
        with pytest.raises(InputError) as caught:
            import_manifests([path])
        assert REFUSED[path.name] in str(caught.value)
        assert caught.value.location is not None
        assert caught.value.location.line
        return
    result = import_manifests([path])
    assert result.differences == []
    text = render_kubernetes(result.spec)
    report = check_manifests(parse_manifests(text, "r.yaml"), ["r.yaml"], spec=result.spec)
    assert report.ok, report.text()


def test_replicas_keep_their_differences_and_share_the_rest() -> None:
    result = import_manifests([CORPUS / "09-rbg-sglang-pd.yaml"])
    spec = result.spec
    assert list(spec.replicas) == ["sglang-pd-prefill", "sglang-pd-decode"]
    assert spec.engine.args["tp-size"] == "2"
    tier = resolve_tier(spec)
    assert {r: tier.replicas[r].flags["disaggregation-mode"] for r in spec.replicas} == {
        "sglang-pd-prefill": "prefill",
        "sglang-pd-decode": "decode",
    }
    assert all(r.gpu_count == 2 for r in spec.replicas.values())


def test_secrets_stay_references_and_env_strings_become_flags() -> None:
    result = import_manifests([CORPUS / "03-kserve-llmisvc-vllm.yaml"])
    assert result.spec.engine.args["max-num-seqs"] == "128"  # from VLLM_ADDITIONAL_ARGS
    assert "secret: HF_TOKEN" in result.text
    assert "VLLM_ADDITIONAL_ARGS" not in result.text


def test_a_literal_credential_is_refused(tmp_path: Path) -> None:
    text = (CORPUS / "12-flagger-canary.yaml").read_text()
    token = "hf_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDc"
    text = text.replace(
        "        - name: sglang\n",
        f"        - name: sglang\n          env: [{{name: HF_TOKEN, value: {token}}}]\n",
    )
    (tmp_path / "m.yaml").write_text(text)
    with pytest.raises(InputError) as caught:
        import_manifests([tmp_path / "m.yaml"])
    assert token not in str(caught.value)
    assert caught.value.location is not None
    assert (
        caught.value.location.line
        == text.splitlines().index(next(line for line in text.splitlines() if token in line)) + 1
    )


def test_the_cli_reads_manifests_and_writes_a_spec(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "tier.yaml"
    result = run_cli(
        "import", str(CORPUS / "13-statefulset-servicemonitor.yaml"), "--output", str(out)
    )
    assert result.code == 0, result.err
    assert "round trip: the spec's Kubernetes rendering runs the same flags" in result.err
    assert run_cli("render", "--target", "kubernetes", str(out)).code == 0
    assert (
        run_cli(
            "import", str(CORPUS / "13-statefulset-servicemonitor.yaml"), "--output", str(out)
        ).code
        == 2
    )
