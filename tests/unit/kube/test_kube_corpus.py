"""The corpus of real-world-shaped manifests (tests/fixtures/kube_corpus/, provenance in each
file's first comment): every file validates with no violation, and every engine in it is
found and checked (a typo put into one of its flags is caught, located to that line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.contracts.kubernetes import check_manifests
from tierctl.kubernetes import parse_manifests, read_manifests
from tierctl.kubernetes.containers import engine_containers

CORPUS = Path(__file__).resolve().parents[2] / "fixtures/kube_corpus"
FILES = sorted(CORPUS.glob("*.yaml"))

#: file -> (engine containers found, a flag token to corrupt, its typo). None: no engine
#: whose flags tierctl reads (Dynamo's wrapper).
ENGINES: dict[str, tuple[int, str | None, str]] = {
    "01-lws-sglang-multinode.yaml": (2, "--trust-remote-code", "--trust-remote-cod3"),
    "02-lws-vllm-ray.yaml": (1, "--pipeline-parallel-size", "--pipeline-paralel-size"),
    "03-kserve-llmisvc-vllm.yaml": (1, "--enable-prefix-caching", "--enable-prefix-cashing"),
    "04-kserve-llmisvc-tp.yaml": (1, "--gpu-memory-utilization", "--gpu-memory-utilisation"),
    "05-llm-d-decode.yaml": (1, "--block-size", "--blok-size"),
    "06-production-stack-helm.yaml": (1, "--dtype", "--dtyp3"),
    # sh -c "python3 -m dynamo.vllm ...": vLLM inside Dynamo's worker (#41).
    "07-dynamo-agg.yaml": (1, "--model", "--mdoel"),
    "08-dynamo-sglang-tp.yaml": (1, "--enable-metrics", "--enable-metric5"),
    "09-rbg-sglang-pd.yaml": (2, "--disaggregation-mode", "--disagregation-mode"),
    "10-plain-deployment-vllm.yaml": (1, "--max-num-batched-tokens", "--max-num-bached-tokens"),
    "11-argo-rollout-analysis.yaml": (1, "--enable-prefix-caching", "--enable-prefix-cashing"),
    "12-flagger-canary.yaml": (1, "--mem-fraction-static", "--mem-fraction-statik"),
    "13-statefulset-servicemonitor.yaml": (1, "--chunked-prefill-size", "--chunked-prefil-size"),
    "14-kustomize-list-v1alpha2.yaml": (1, "--max-loras", "--max-lorass"),
    # Shapes from public files the first corpus lacked (tierctl's kube/ was fixed for them).
    "15-lws-vllm-gpu-shell.yaml": (1, "--tensor-parallel-size", "--tensor-paralel-size"),
    "16-production-stack-helm-full.yaml": (1, "--max-model-len", "--max-model-lenn"),
    "17-shell-string-args.yaml": (2, "--trust-remote-code", "--trust-remote-cod3"),
    "18-kserve-v1alpha2-runtime.yaml": (2, None, ""),  # no image: typo test in real_shapes
    # The SGLang worker and (since #41) Dynamo's vLLM worker, python3 -m dynamo.vllm.
    "19-dynamo-v1beta1.yaml": (2, "--enable-metrics", "--enable-metric5"),
    "20-argo-web-flagger-webhooks.yaml": (0, None, ""),
    "21-lws-disaggregatedset.yaml": (2, "--disaggregation-mode", "--disagregation-mode"),
    "22-rbg-v1alpha2-standalone.yaml": (2, "--tp-size", "--tp-sise"),
    "23-llm-d-native-sidecar.yaml": (1, "--enforce-eager", "--enforce-eagr"),
}


def test_the_corpus_is_big_enough_and_says_where_each_shape_comes_from() -> None:
    assert len(FILES) >= 12
    assert sorted(f.name for f in FILES) == sorted(ENGINES)
    for f in FILES:
        assert "Shaped after" in f.read_text()[:600], f.name


def test_the_whole_corpus_validates_with_no_violation() -> None:
    report = check_manifests(read_manifests([CORPUS]), [str(CORPUS)])
    assert report.ok, report.text()
    # KServe's samples give no image: their flags are checked against the newest catalog,
    # and a warning says so (as compose's validate does for an unpinned tag).
    assert all("newest shipped catalog" in w.message for w in report.warnings), report.text()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_engine_is_found_and_its_flags_checked(path: Path) -> None:
    count, token, typo = ENGINES[path.name]
    text = path.read_text()
    found = [e for m in parse_manifests(text, path.name) for e in engine_containers(m)]
    assert len(found) == count
    if token is None:
        return
    assert token in text
    broken = text.replace(token, typo)
    report = check_manifests(parse_manifests(broken, path.name), [path.name])
    typos = [v for v in report.violations if v.rule == "TC004"]
    assert typos, report.text()
    lines = [i + 1 for i, line in enumerate(broken.splitlines()) if typo in line]
    for v in typos:
        assert typo in v.message
        assert v.location is not None
        assert v.location.line in lines
