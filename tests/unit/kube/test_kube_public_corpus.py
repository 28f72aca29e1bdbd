"""The public corpus (tests/fixtures/kube_public/): manifests nobody here wrote, copied
verbatim from the projects that publish them (LeaderWorkerSet, SGLang's RBG, vLLM's
production-stack and AIBrix, KServe's LLMInferenceService samples, NVIDIA Dynamo), each with
its provenance in PROVENANCE.json (repository, path, commit, licence, sha256 of the bytes).

Table-driven (#41): per file, the engine containers found, the validate findings that are
true (a literal API key in an argv, a TP the pod's GPUs cannot hold; every other finding
would be a false positive), with and without ``--engine``; a typo put into each checked
flag is caught on its own line; ``import`` runs (its rendered pods would start: command,
placement, env expansion) or refuses with a located reason; what imports round-trips
render -> import -> render argv-exact. ``test_the_figures`` prints the totals the docs give.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tierctl.adopt.kubernetes import KubeImport, import_manifests
from tierctl.contracts.kubernetes import KubeCheck, check_manifests, choose_catalog, image_release
from tierctl.errors import InputError
from tierctl.kubernetes import parse_manifests
from tierctl.kubernetes.containers import EngineContainer, engine_containers
from tierctl.render.kubernetes import render_kubernetes

PUBLIC = Path(__file__).resolve().parents[2] / "fixtures/kube_public"
ALL = sorted(PUBLIC.glob("*.yaml"))
#: Files that are not valid YAML as published (a real defect: kubectl refuses them too):
#: file -> the line validate locates it to. Google's samples: a Deployment indented under
#: `apiVersion:` (line 17), a list item indented past its key (37), `{{HF_TOKEN}}` unquoted,
#: a flow mapping as a key (95).
PARSE_ERRORS = {
    "gke-samples--ai-ml--gke-model-armor--preparing-the-model--vllm-gemma-deployment.yaml": 37,
    "gke-samples--ai-ml--infw-gw--examples--getting-started--vllm-llama3-8b-instruct.yaml": 17,
    "gke-samples--ai-ml--llm-serving-llama--vllm--vllm-llama4-maverick-17b-128e-instruct-fp8.yaml": 95,
    # llm-d's wide-EP decode as committed mid-merge: `<<<<<<< HEAD` markers in the container.
    "llm-d-03da3b0--guides--wide-ep-lws--manifests--modelserver--base--decode.yaml": 46,
}
FILES = [f for f in ALL if f.name not in PARSE_ERRORS]
NEWEST = {"vllm": "vllm==0.33.0", "sglang": "sglang==0.5.23"}

#: What each refusal says (the outcome's key -> a part of the message).
REFUSALS = {
    "literal credential": "literal credential",
    "no shipped catalog": "no shipped flag catalog",
    "shell script with other commands": "shell script with other commands",
    "no multi-node launch": "no multi-node launch",
    "a controller's template": "controller's template",
    "older than every catalog": "must agree",
    "dynamo worker": "NVIDIA Dynamo's worker",
    "a controller's variable": "from nothing in the container's env",
}

#: file -> (engine containers, true findings without --engine as (rule, line), further true
#: findings with --engine KIND==NEWEST, import outcome). Outcomes: "runs"; "engine" (runs
#: with --engine: the image names no release, or none is given); "refused: KEY" or
#: "engine-refused: KEY" (refused, located, with the REFUSALS message); None: no engine.
#: With --engine sglang==0.5.23 (each confirmed with that release's own parser): OME's
#: Kimi-K2 on `sglang:dev` gives --enable-deepep-moe (SGLang 0.4's; unrecognized) and
#: --cuda-graph-bs (ambiguous), its Nemotron `--reasoning-parser nano_v3` (invalid choice);
#: without --engine they are warnings (the `dev` build may take them), not typos.
#: The true findings: TC006 at Google's NeMo-RL Gemma deployment, 8 GPUs given to a TP 4
#: vLLM (4 idle; NGC's `vllm:26.02-py3` tag is NVIDIA's release, not vLLM 26.02);
#: TC006 at a `sh -c` given the engine's words one by one (Dynamo's
#: SGLang disagg example: the shell runs `python3` alone); TC006 at an `--api-key sk-...` line is a literal credential in an
#: argv (AIBrix's samples); TC006 at vineyard's resources is TP 4 on 1 GPU; TC004 at the
#: GIE deployment's `--compilation-config 3` holds only for --engine vllm==0.33.0 (vLLM 0.32+
#: takes a JSON object; the image is a dated lmcache build, so without --engine the newest
#: catalog only warns); TC004 at `--cuda-graph-max-bs` (SGLang's PD decode example, llm-d's
#: Kimi-K3) holds for --engine sglang==0.5.23, whose parser has no such flag (an ambiguous
#: abbreviation there): on `:latest` or an unpinned tag it is a warning, not a violation.
TABLE: dict[str, tuple[int, list[tuple[str, int]], list[tuple[str, int]], str | None]] = {
    "aibrix--benchmarks--scenarios--gateway--7b.yaml": (
        1,
        [("TC006", 41)],
        [],
        "refused: literal credential",
    ),
    "aibrix--development--tutorials--lora--deployment.yaml": (0, [], [], None),
    "aibrix--python--aibrix_kvcache--tests--pd_reuse--vllm-pd.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--adapter--base.yaml": (1, [], [], "refused: no shipped catalog"),
    "aibrix--samples--ai-gateway-integration--llama-7b.yaml": (0, [("TC006", 85)], [], None),
    "aibrix--samples--autoscaling--deploy.yaml": (1, [], [], "refused: no shipped catalog"),
    "aibrix--samples--deepseek-r1--deepseek-r1-huggingface.yaml": (
        1,
        [],
        [],
        "engine-refused: shell script with other commands",
    ),
    "aibrix--samples--deepseek-r1--deepseek-r1-local-nvme.yaml": (
        1,
        [],
        [],
        "engine-refused: shell script with other commands",
    ),
    "aibrix--samples--disaggregation--sglang--pool.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--disaggregation--sglang--replica.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--disaggregation--sglang--tp-1p1d.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--disaggregation--vllm--1p1d.yaml": (2, [], [], "refused: no shipped catalog"),
    "aibrix--samples--disaggregation--vllm--pool.yaml": (2, [], [], "refused: no shipped catalog"),
    "aibrix--samples--disaggregation--vllm--replica.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--distributed--fleet.yaml": (1, [], [], "refused: no shipped catalog"),
    "aibrix--samples--heterogeneous--deepseek-coder-7b-l20-deployment.yaml": (
        1,
        [("TC006", 55)],
        [],
        "refused: literal credential",
    ),
    "aibrix--samples--heterogeneous--deepseek-coder-7b-v100-deployment.yaml": (
        1,
        [("TC006", 54)],
        [],
        "refused: literal credential",
    ),
    "aibrix--samples--kvcache--infinistore--vllm.yaml": (
        1,
        [("TC006", 91)],
        [],
        "refused: literal credential",
    ),
    "aibrix--samples--kvcache--l1cache--vllm.yaml": (
        1,
        [("TC006", 83)],
        [],
        "refused: literal credential",
    ),
    "aibrix--samples--kvcache--vineyard--deployment-tp.yaml": (
        1,
        [("TC006", 69)],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--multimodality--vllm--llava-7b.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--multimodality--vllm--qwen-audio.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "aibrix--samples--multimodality--vllm--qwen-vl.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "dynamo--examples--backends--sglang--deploy--disagg-multinode.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "dynamo--examples--backends--sglang--deploy--v1beta1--agg.yaml": (
        1,
        [],
        [],
        "refused: dynamo worker",
    ),
    "kserve--docs--samples--llmisvc--agentic-tool-calling--llmisvc-single-gpu.yaml": (
        1,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--agentic-tool-calling--nemotron-3-ultra-pd.yaml": (
        2,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--dp-ep--deepseek-r1-gpu-rdma-roce--llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml": (
        2,
        [],
        [],
        "engine-refused: no multi-node launch",
    ),
    "kserve--docs--samples--llmisvc--dp-ep--deepseek-r1-gpu-rdma-roce--llm-inference-service-dp-ep-deepseek-r1-gpu-naive.yaml": (
        2,
        [],
        [],
        "engine-refused: no multi-node launch",
    ),
    "kserve--docs--samples--llmisvc--dp-ep--deepseek-r1-gpu-rdma-roce--llm-inference-service-dp-ep-deepseek-r1-pd-gpu-p-deepep-ht-d-pplx.yaml": (
        4,
        [],
        [],
        "engine-refused: no multi-node launch",
    ),
    "kserve--docs--samples--llmisvc--e2e-gpt-oss--inference_pd_disaggregation.yaml": (
        2,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--kv-cache-offloading--llm-inference-service-kv-cache-offloading.yaml": (
        1,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--lora-adapters--test-examples--01-lora-hf-cpu.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "kserve--docs--samples--llmisvc--multi-gpu-vendor--llm-inference-service-qwen2-7b-nvidia-with-scheduler.yaml": (
        1,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--opt-125m-cpu--llm-inference-service-facebook-opt-125m-cpu.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "kserve--docs--samples--llmisvc--opt-125m-cpu--llm-inference-service-pd-facebook-opt-125m-cpu.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "kserve--docs--samples--llmisvc--precise-prefix-kv-cache-routing--llm-inference-service-qwen2-7b-gpu-kv-cache-routing.yaml": (
        1,
        [],
        [],
        "engine-refused: a controller's template",
    ),
    "kserve--docs--samples--llmisvc--single-node-gpu--llm-inference-service-pd-qwen2-7b-gpu.yaml": (
        2,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--single-node-gpu--llm-inference-service-qwen2-7b-gpu-no-scheduler.yaml": (
        1,
        [],
        [],
        "engine",
    ),
    "kserve--docs--samples--llmisvc--single-node-gpu--llm-inference-service-qwen2-7b-gpu.yaml": (
        1,
        [],
        [],
        "engine",
    ),
    "llm-d--guides--agentic-serving--modelserver--gpu--sglang--kimi-k3--base--statefulset.yaml": (
        1,
        [],
        [("TC004", 68)],
        "engine-refused: shell script with other commands",
    ),
    "llm-d--guides--batch-serving--asynchronous-processing--multitenant--manifests--vllm.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "lws--docs--examples--sglang--lws.yaml": (2, [], [], "engine"),
    "lws--docs--examples--vllm--GPU--lws.yaml": (1, [], [], "refused: no shipped catalog"),
    "lws--docs--examples--vllm--TPU--lws.yaml": (1, [], [], "engine-refused: no multi-node launch"),
    "production-stack--examples--disaggregated_prefill_orchestrated--decode-deploy.yaml": (
        1,
        [],
        [],
        "engine-refused: shell script with other commands",
    ),
    "production-stack--examples--disaggregated_prefill_orchestrated--prefill-deploy.yaml": (
        1,
        [],
        [],
        "engine-refused: shell script with other commands",
    ),
    "production-stack--operator--config--samples--production-stack_v1alpha1_vllmruntime.yaml": (
        0,
        [],
        [],
        None,
    ),
    "production-stack--src--gateway_inference_extension--configs--vllm--gpu-deployment.yaml": (
        1,
        [],
        [("TC004", 29)],
        "engine",
    ),
    "rbg--examples--deprecated--v1alpha1--multi-nodes--sglang.yaml": (2, [], [], "engine"),
    "rbg--examples--deprecated--v1alpha1--multi-nodes--vllm.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--deprecated--v1alpha1--pd-disagg--sglang--sglang-pd.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--deprecated--v1alpha1--single-node--sglang.yaml": (1, [], [], "engine"),
    "rbg--examples--deprecated--v1alpha1--single-node--vllm.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--inference--agg-leader-worker.yaml": (1, [], [], "engine"),
    "rbg--examples--inference--agg-standalone.yaml": (1, [], [], "runs"),
    "rbg--examples--inference--ecosystem--dynamo--agg-multi-nodes.yaml": (
        1,
        [],
        [],
        "refused: dynamo worker",
    ),
    "rbg--examples--inference--ecosystem--dynamo--agg.yaml": (1, [], [], "refused: dynamo worker"),
    "rbg--examples--inference--ecosystem--dynamo--pd-disagg-multi-nodes.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "rbg--examples--inference--ecosystem--dynamo--pd-disagg.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "rbg--examples--inference--ecosystem--mooncake--mooncake-store--agg-kvcache-reuse-with-mooncake.yaml": (
        1,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--inference--ecosystem--mooncake--mooncake-store--pd-disagg-kvcache-reuse-with-mooncake.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--inference--ecosystem--mooncake--mooncake-transfer-engine--sgl-pd-disagg-with-mooncake-te.yaml": (
        2,
        [],
        [],
        "refused: no shipped catalog",
    ),
    "rbg--examples--inference--ecosystem--mooncake--mooncake-transfer-engine--vllm-pd-disagg-with-mooncake-te.yaml": (
        2,
        [],
        [],
        "engine",
    ),
    "rbg--examples--inference--pd-disagg-leader-worker.yaml": (2, [], [], "engine"),
    "rbg--examples--inference--pd-disagg-standalone.yaml": (2, [], [], "runs"),
    "sglang--docs--references--multi_node_deployment--lws_pd--lws-examples--d.yaml": (
        2,
        [],
        [("TC004", 41), ("TC004", 178)],
        "engine",
    ),
    "dynamo--components--backends--sglang--deploy--agg_router.yaml": (
        1,
        [],
        [],
        "refused: dynamo worker",
    ),
    # Dynamo 0.4's SGLang workers: `sh -c` given the command word by word (the shell runs
    # `python3` alone): a true TC006 at each script token, and no engine starts.
    "dynamo--components--backends--sglang--deploy--disagg.yaml": (
        0,
        [("TC006", 96), ("TC006", 163)],
        [],
        None,
    ),
    "dynamo--components--backends--trtllm--deploy--agg.yaml": (0, [], [], None),
    # A Dynamo recipe: sh -c "python3 -m dynamo.vllm ... --is-prefill-worker ...", GPUs in the
    # service's resources (a TP 4 given 1 GPU is caught: test_kube_issue41).
    "dynamo--recipes--llama-3-70b--vllm--disagg-single-node--deploy.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "dynamo--examples--backends--vllm--deploy--agg_router.yaml": (
        1,
        [],
        [],
        "refused: dynamo worker",
    ),
    "dynamo--examples--backends--vllm--deploy--disagg-multinode.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "dynamo--examples--backends--vllm--deploy--disagg.yaml": (2, [], [], "refused: dynamo worker"),
    "dynamo--examples--backends--vllm--deploy--disagg_kvbm.yaml": (
        2,
        [],
        [],
        "refused: dynamo worker",
    ),
    "dynamo--examples--backends--vllm--deploy--v1beta1--agg.yaml": (
        1,
        [],
        [],
        "refused: dynamo worker",
    ),
    "lws--docs--examples--llamacpp--k8s--lws.yaml": (0, [], [], None),
    "lws--docs--examples--saxml--lws.yaml": (0, [], [], None),
    "lws--docs--examples--tensorrt-llm--lws.yaml": (0, [], [], None),
    "lws--docs--examples--vllm--lws.yaml": (1, [], [], "engine-refused: older than every catalog"),
    "lws-2d8e61b--docs--examples--sglang--lws.yaml": (2, [], [], "engine"),
    "lws-2d8e61b--docs--examples--vllm--GPU--lws.yaml": (
        1,
        [],
        [],
        "engine-refused: no multi-node launch",
    ),
    "sglang--docker--k8s-sglang-service.yaml": (1, [], [], "engine"),
    "ome--config--runtimes--srt--Qwen--Qwen2-7B-Instruct-rt.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "ome--config--runtimes--srt--deepseek-rdma-pd-rt.yaml": (
        4,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "ome--config--runtimes--srt--kimi-k2-pd-rt.yaml": (
        4,
        [],
        [
            ("TC004", 83),
            ("TC004", 182),
            ("TC004", 277),
            ("TC004", 287),
            ("TC004", 373),
            ("TC004", 383),
        ],
        "engine-refused: a controller's variable",
    ),
    "ome--config--runtimes--srt--nvidia--nvidia-nemotron-3-nano-30b-a3b-fp8-rt.yaml": (
        1,
        [],
        [("TC004", 63)],
        "engine-refused: a controller's variable",
    ),
    "ome--config--runtimes--vllm--deepseek-ai--deepseek-v4-flash-rt.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "ome--config--runtimes--vllm--llama-3-1-405b-instruct-fp8-rt.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "ome--config--runtimes--vllm--llama-3-1-8b-instruct-rt.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "ome--config--samples--benchmark--deepseek-r1-rdma.yaml": (0, [], [], None),
    "llmaz--docs--examples--multi-nodes--service.yaml": (2, [], [], "engine"),
    "llmaz--docs--examples--sglang--playground.yaml": (0, [], [], None),
    "llmaz--docs--examples--speculative-decoding--vllm--playground.yaml": (0, [], [], None),
    "llmaz--test--config--backends--sglang.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "llmaz--test--config--backends--vllm.yaml": (
        2,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--adk-vllm--deploy-llm--deploy-llm.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-multihost-gpus--vllm-deepseek-r1-A3.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-multihost-gpus--vllm-llama3-405b-A3-HDML.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-serving-gemma--vllm--vllm-2-27b-it.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-serving-gemma--vllm--vllm-3-27b-it.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-serving-gemma--vllm--vllm-7b-it-tensorparallelism.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--llm-serving-gemma--vllm--vllm-7b-kvcache.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--mix-train-and-inference--workloads--vllm-gemma-3-12b-it.yaml": (
        1,
        [],
        [],
        "engine-refused: older than every catalog",
    ),
    "gke-samples--ai-ml--nemo-rl-on-gke--nemoRL--gemma3-27b-it--nvidia-vllm-post-trained-gemma3-27-deploy.yaml": (
        1,
        [("TC006", 35)],
        [],
        "engine",
    ),
    "gke-samples--ai-ml--vllm-tpu--vllm-llama3-70b.yaml": (1, [], [], "engine"),
    # llm-d's wide-EP: bash -c, comments, `find`, `START_RANK=$(( ... ))`, `exec vllm serve \`
    # with `$((A * B))` and quoted JSON over several lines; one workerTemplate for the group.
    "llm-d--guides--wide-ep-lws--manifests--modelserver--base--decode.yaml": (
        1,
        [],
        [],
        "engine-refused: no multi-node launch",
    ),
}


def _prov() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads((PUBLIC / "PROVENANCE.json").read_text())
    return data


def test_every_file_is_a_verbatim_copy_with_its_provenance() -> None:
    prov = _prov()
    assert len(FILES) >= 60
    assert sorted(prov) == [f.name for f in ALL]
    assert sorted(TABLE) == [f.name for f in FILES]
    for f in ALL:
        entry = prov[f.name]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry["repo"]), f.name
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]), f.name
        assert entry["path"].endswith((".yaml", ".yml")), f.name
        assert entry["licence"].startswith("Apache-2.0"), f.name
        assert hashlib.sha256(f.read_bytes()).hexdigest() == entry["sha256"], f.name
    projects = {entry["repo"] for entry in prov.values()}
    assert len(projects) >= 7  # no single source: not tuned to a handful


@pytest.mark.parametrize("name", sorted(PARSE_ERRORS))
def test_invalid_yaml_is_refused_located_to_its_line(name: str) -> None:
    path = PUBLIC / name
    with pytest.raises(InputError) as caught:
        parse_manifests(path.read_text(), name)
    assert caught.value.location is not None
    assert caught.value.location.line == PARSE_ERRORS[name]


def _engines(path: Path) -> list[EngineContainer]:
    return [e for m in parse_manifests(path.read_text(), path.name) for e in engine_containers(m)]


def _found(report: Any) -> list[tuple[str, int]]:
    return sorted({(v.rule, v.location.line) for v in report.violations})


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_validate_finds_only_what_is_true(path: Path) -> None:
    count, true, with_engine, _ = TABLE[path.name]
    manifests = parse_manifests(path.read_text(), path.name)
    found = _engines(path)
    assert len(found) == count
    assert _found(check_manifests(manifests, [path.name])) == true
    for kind in sorted({e.profile.kind for e in found}):
        report = check_manifests(manifests, [path.name], settings=KubeCheck(engine=NEWEST[kind]))
        assert set(_found(report)) <= set(true) | set(with_engine)
    if with_engine:
        kind = found[0].profile.kind
        report = check_manifests(manifests, [path.name], settings=KubeCheck(engine=NEWEST[kind]))
        assert set(with_engine) <= set(_found(report))


def _form(e: EngineContainer) -> str:
    """How the engine was found: the launcher its argv (or its shell script's command)
    starts with, an image's entrypoint, or KServe's runtime."""
    launcher = " ".join(e.profile.split_command(e.argv).launcher).rsplit("/", 1)[-1]
    if e.shell:
        return f"shell script: {launcher}"
    if not e.container.get("command"):
        if e.wrapper:  # args only, the whole command (Dynamo's images exec their args)
            return f"args: {launcher}"
        return "kserve runtime" if e.manifest.kind == "LLMInferenceService" else "image entrypoint"
    return launcher


HAND = PUBLIC.parent / "kube_corpus"


def test_every_launcher_form_of_the_corpus_is_found() -> None:
    forms = {_form(e) for f in FILES for e in _engines(f)}
    assert {
        "python3 -m sglang.launch_server",
        "vllm serve",
        "python3 -m vllm.entrypoints.openai.api_server",
        "shell script: sglang serve",  # llm-d's Kimi-K3: bash -c, MY_IP=..., export, echo
        "shell script: vllm serve",  # AIBrix's Ray head: bash -lc -- "ulimit ...; vllm serve"
        "shell script: python3 -m sglang.launch_server",
        "kserve runtime",
        # NVIDIA Dynamo's workers: the engine's parser beside Dynamo's own flags (#41).
        "python3 -m dynamo.vllm",
        "python3 -m dynamo.sglang",
        "args: python3 -m dynamo.sglang.worker",  # Dynamo 0.4's spelling, args only
    } <= forms, forms
    assert all(e.wrapper for f in FILES for e in _engines(f) if "dynamo." in _form(e))
    # Args only, the image's entrypoint running vLLM: the hand-written corpus has it.
    hand = {_form(e) for f in sorted(HAND.glob("*.yaml")) for e in _engines(f)}
    assert "image entrypoint" in hand, hand
    # vLLM's CPU image (KServe's CPU samples) is vLLM.
    cpu = [
        e for f in FILES for e in _engines(f) if "vllm-openai-cpu" in str(e.container.get("image"))
    ]
    assert cpu
    assert {e.profile.kind for e in cpu} == {"vllm"}
    # apt-get's and pip's flags in the same script are not read as vLLM's.
    [app] = _engines(
        PUBLIC
        / "production-stack--examples--disaggregated_prefill_orchestrated--decode-deploy.yaml"
    )
    assert app.shell
    assert any(c[0] == "apt-get" for c in app.script_other)
    assert not any(t in ("-y", "--no-install-recommends") for t in app.argv)


def _region(path: Path, e: EngineContainer) -> tuple[int, int]:
    """The container's lines in the file: from its first key to the line before whatever
    the document holds next (a block script's lines included), by the YAML reader's lines."""
    at = (*e.manifest.prefix, *e.path)
    inside = [line for p, line in e.manifest.lines.items() if p[: len(at)] == at]
    after = [line for _, line in e.manifest.lines.items() if line > max(inside)]
    return min(inside), (min(after) - 1 if after else len(path.read_text().splitlines()))


def _mutations(path: Path) -> list[tuple[int, str, str]]:
    """(line, flag, typo) for up to four flags of each checked engine container: the line is
    the first of the container's lines whose text holds the flag as a word (found in the
    text, not by the code under test's locating)."""
    lines = path.read_text().splitlines()
    out: list[tuple[int, str, str]] = []
    for e in _engines(path):
        catalog = choose_catalog(e, None, None).catalog
        if catalog is None:
            continue
        flags = [t.split("=", 1)[0] for t in e.argv if t.startswith("--") and len(t) > 5]
        first, last = _region(path, e)
        for flag in [f for f in dict.fromkeys(flags) if catalog.lookup(f) is not None][:4]:
            word = re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])")
            hit = next(
                (
                    i
                    for i in range(first - 1, last)
                    # A comment naming the flag (llm-d's `# --enable-eplb: ...`) is no use.
                    if word.search(lines[i]) and not lines[i].lstrip().startswith("#")
                ),
                None,
            )
            if hit is not None:
                out.append((hit + 1, flag, flag[:-2] + flag[-1] + flag[-2] + "q"))
    return sorted(set(out))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_typo_is_caught_on_its_own_line(path: Path) -> None:
    for line, flag, typo in _mutations(path):
        lines = path.read_text().splitlines(keepends=True)
        word = re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])")
        lines[line - 1] = word.sub(typo, lines[line - 1], count=1)
        report = check_manifests(parse_manifests("".join(lines), path.name), [path.name])
        hits = [v for v in report.violations if v.rule == "TC004" and typo in v.message]
        assert hits, (flag, line, report.text())
        assert {v.location.line for v in hits if v.location} == {line}, (flag, line)


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL = re.compile(r"\$\{?[A-Za-z_]")


def _would_start(result: KubeImport, source: list[EngineContainer]) -> list[str]:
    """Why the imported spec's rendered engine pods would not start as the manifests' do."""
    problems: list[str] = []
    own = {k: v for e in source for k, v in (e.site.spec.get("nodeSelector") or {}).items()}
    for m in parse_manifests(render_kubernetes(result.spec), "(rendered)"):
        for e in engine_containers(m):
            env = {str(i["name"]) for i in e.container.get("env") or []}
            argv = [*(e.container.get("command") or []), *(e.container.get("args") or [])]
            if not e.container.get("command"):
                problems.append("no command: the image's entrypoint would run")
            elif not e.profile.matches_command(argv[: len(e.container["command"])]):
                problems.append(f"command {e.container['command']} starts no engine")
            for token in map(str, argv):
                refs = [v for v in _VAR.findall(token) if v not in env]
                refs = [
                    v for v in refs if not (m.kind == "LeaderWorkerSet" and v.startswith("LWS_"))
                ]
                if refs:
                    problems.append(f"$({refs[0]}) is in no env")
                if _SHELL.search(_VAR.sub("", token)):
                    problems.append(f"{token!r} needs a shell")
            selector = e.site.spec.get("nodeSelector") or {}
            if selector.get("kubernetes.io/hostname") in ("localhost", "127.0.0.1"):
                problems.append("pinned to a node named localhost")
            problems += [f"node selector {k} lost" for k, v in own.items() if selector.get(k) != v]
            tag = image_release(e.profile, str(e.container.get("image") or ""))
            if tag is not None and tag != result.spec.engine.version:
                problems.append(f"image {tag}, version {result.spec.engine.version}")
    return problems


def _import(path: Path, outcome: str) -> KubeImport:
    engine = NEWEST[_engines(path)[0].profile.kind] if outcome.startswith("engine") else None
    return import_manifests([path], engine=engine)


@pytest.mark.parametrize("path", [f for f in FILES if TABLE[f.name][3]], ids=lambda p: p.name)
def test_import_runs_or_refuses_with_a_located_reason(path: Path) -> None:
    outcome = TABLE[path.name][3]
    assert outcome is not None
    if ": " in outcome:
        with pytest.raises(InputError) as caught:
            _import(path, outcome)
        assert REFUSALS[outcome.split(": ", 1)[1]] in str(caught.value)
        location = caught.value.location
        assert location is not None
        assert location.file == str(path)
        assert location.line is not None
        assert 1 <= location.line <= len(path.read_text().splitlines())
        assert "None" not in str(caught.value).splitlines()[0]
        assert "tier.yaml" not in str(caught.value)
        return
    result = _import(path, outcome)
    assert result.differences == []
    assert _would_start(result, _engines(path)) == []
    if outcome == "engine":
        assert result.spec.engine.version == NEWEST[result.spec.engine.kind].partition("==")[2]


def _argvs(text: str) -> dict[tuple[str, str | None, str], Any]:
    out: dict[tuple[str, str | None, str], Any] = {}
    for m in parse_manifests(text, "(rendered)"):
        for e in engine_containers(m):
            c = e.container
            out[(m.name, e.site.labels.get("tierctl/replica"), e.site.role)] = (
                c.get("command"),
                c.get("args"),
                c.get("image"),
                e.site.spec.get("nodeSelector"),
                e.site.spec.get("volumes"),
            )
    return out


@pytest.mark.parametrize(
    "path",
    [f for f in FILES if TABLE[f.name][3] in ("runs", "engine")],
    ids=lambda p: p.name,
)
def test_what_imports_round_trips_argv_exact(path: Path) -> None:
    first = _import(path, str(TABLE[path.name][3]))
    rendered = render_kubernetes(first.spec)
    again = import_manifests(["-"], stdin=rendered, tier=first.spec.tier)
    assert again.differences == []
    assert _argvs(render_kubernetes(again.spec)) == _argvs(rendered)
    assert again.spec.engine.version == first.spec.engine.version
    assert again.spec.host == first.spec.host
    assert {n: r.role for n, r in again.spec.replicas.items()} == {
        n: r.role for n, r in first.spec.replicas.items()
    }


def test_the_figures() -> None:
    """The totals docs/kubernetes.md gives (printed with -s)."""
    engines = sum(TABLE[f.name][0] for f in FILES)
    true = sum(len(TABLE[f.name][1]) for f in FILES)
    outcomes = [TABLE[f.name][3] for f in FILES if TABLE[f.name][3]]
    typos = sum(len(_mutations(f)) for f in FILES)
    figures = {
        "files": len(ALL),
        "projects": len({entry["repo"] for entry in _prov().values()}),
        "invalid YAML, located": len(PARSE_ERRORS),
        "engine containers": engines,
        "true findings": true,
        "typos located": typos,
        "imports that run": sum(o == "runs" for o in outcomes),
        "imports that run with --engine": sum(o == "engine" for o in outcomes),
        "imports refused, located": sum(": " in o for o in outcomes),
    }
    print(figures)
    assert figures["files"] >= 60
    assert figures["typos located"] >= 60
    assert figures["imports that run"] + figures["imports that run with --engine"] >= 15
