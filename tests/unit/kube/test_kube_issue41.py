"""Regression tests, one per defect of #41 and #39's Kubernetes render-fidelity bullet.

Manifests written here are small, made for the defect (the public corpus covers the real
shapes: test_kube_public_corpus.py); each test fails on the code before its fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tierctl.adopt.kubernetes import import_manifests
from tierctl.contracts.kubernetes import KubeCheck, check_manifests
from tierctl.errors import InputError
from tierctl.kubernetes import parse_manifests
from tierctl.kubernetes.containers import engine_containers
from tierctl.render.kubernetes import ENGINE_ANNOTATION, render_kubernetes
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
GLM = ROOT / "examples/glm53-long-context/tier.yaml"
LLAMA = ROOT / "examples/vllm-llama70b/tier.yaml"


def _deployment(container: str, *, pod: str = "", image: str = "vllm/vllm-openai:v0.33.0") -> str:
    """A one-container Deployment; ``container`` holds the container's other keys (YAML at
    10 spaces), ``pod`` the pod spec's (at 6)."""
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: eng\nspec:\n"
        "  selector: {matchLabels: {app: eng}}\n  template:\n    metadata: {labels: {app: eng}}\n"
        f"    spec:\n{pod}      containers:\n        - name: engine\n          image: {image}\n"
        f"{container}"
    )


def _check(text: str, engine: str | None = None) -> Any:
    return check_manifests(
        parse_manifests(text, "m.yaml"), ["m.yaml"], settings=KubeCheck(engine=engine)
    )


def _line(text: str, needle: str) -> int:
    return next(i + 1 for i, line in enumerate(text.splitlines()) if needle in line)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


# --- validate -----------------------------------------------------------------------------

SCRIPT = """          command: [/bin/sh, -c]
          args:
            - |
              set -x
              apt-get update && apt-get install -y --no-install-recommends curl
              pip install --no-cache-dir --upgrade hf-transfer
              vllm serve Qwen/Qwen3-8B \\
                --port ${PORT} \\
                --max-model-len 8192 \\
                --gpu-memory-utilisation 0.9
          env: [{name: PORT, value: "8000"}]
"""


def test_a_flag_in_a_block_script_is_located_to_its_own_line() -> None:
    text = _deployment(SCRIPT)
    report = _check(text)
    [typo] = report.violations
    assert "--gpu-memory-utilisation" in typo.message
    assert typo.location is not None
    assert typo.location.line == _line(text, "--gpu-memory-utilisation")  # not the `- |` line


def test_script_lines_around_the_engine_are_not_its_flags() -> None:
    # apt-get's -y and --no-install-recommends, pip's --no-cache-dir: not vLLM's flags.
    report = _check(_deployment(SCRIPT.replace("utilisation", "utilization")))
    assert report.ok, report.text()
    [e] = list(engine_containers(parse_manifests(_deployment(SCRIPT), "m.yaml")[0]))
    assert [c[0] for c in e.script_other] == ["set", "apt-get", "apt-get", "pip"]


def test_a_folded_block_is_located_too() -> None:
    text = _deployment(
        "          command: [bash, -lc, --]\n          args:\n            - >\n"
        "              vllm serve m\n              --max-num-seqz 8\n"
    )
    [typo] = _check(text).violations
    assert typo.location is not None
    assert typo.location.line == _line(text, "--max-num-seqz")


def test_shell_variables_are_the_shells_not_literal_values() -> None:
    # `--port ${PORT}` and `--node-rank $POD_GROUP_INDEX` inside sh -c: filled in at start.
    text = _deployment(
        '          command: [sh, -c]\n          args: ["python3 -m sglang.launch_server '
        '--model-path m --port ${PORT} --node-rank $POD_GROUP_INDEX --nnodes 1"]\n',
        image="lmsysorg/sglang:v0.5.23",
    )
    assert _check(text).ok, _check(text).text()
    # Outside a shell the kubelet passes `$POD_GROUP_INDEX` as written: a wrong value.
    bare = _deployment(
        "          command: [python3, -m, sglang.launch_server]\n"
        '          args: [--model-path, m, --node-rank, "$POD_GROUP_INDEX"]\n',
        image="lmsysorg/sglang:v0.5.23",
    )
    assert any("--node-rank" in v.message for v in _check(bare).violations)


@pytest.mark.parametrize(
    ("argv", "image"),
    [
        (
            "command: [sglang, serve]\n          args: [--model-path, m, --tp-sise, '2']",
            "lmsysorg/sglang:v0.5.23",
        ),
        (
            "command: [/bin/bash, -lc, --]\n          args: ['ulimit -n 65536; vllm serve m --max-num-seqz 8']",
            "vllm/vllm-openai:v0.33.0",
        ),
        ("args: [--model, m, --max-num-seqz, '8']", "vllm/vllm-openai-cpu:v0.33.0"),
    ],
    ids=["sglang-serve", "bash-lc", "vllm-cpu-image-args-only"],
)
def test_every_launcher_form_is_an_engine(argv: str, image: str) -> None:
    report = _check(_deployment(f"          {argv}\n", image=image))
    assert [v.rule for v in report.violations] == ["TC004"], report.text()


def _rbg(gpus: int) -> str:
    return f"""apiVersion: workloads.x-k8s.io/v1alpha2
kind: RoleBasedGroup
metadata: {{name: g}}
spec:
  roles:
    - name: backend
      replicas: 1
      leaderWorkerPattern:
        size: 2
        template:
          spec:
            containers:
              - name: sglang
                image: lmsysorg/sglang:v0.5.23
                command: [python3, -m, sglang.launch_server]
                args: [--model-path, m, --tp, "16", --nnodes, $(RBG_LWP_GROUP_SIZE),
                       --node-rank, $(RBG_LWP_WORKER_INDEX), --dist-init-addr, $(RBG_LWP_LEADER_ADDRESS):6379]
                resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def test_rbg_group_size_variables_are_resolved_for_the_gpu_fit() -> None:
    assert _check(_rbg(8)).ok  # TP 16 over a group of 2 pods: 8 each
    [fit] = _check(_rbg(4)).violations
    assert fit.rule == "TC006"
    assert "needs 8 GPUs" in fit.message


def _kserve(gpus: int) -> str:
    return f"""apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {{name: ep}}
spec:
  model: {{uri: "hf://m"}}
  parallelism: {{data: 16, dataLocal: 8, expert: true, tensor: 1}}
  template:
    containers:
      - name: main
        resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
  worker:
    containers:
      - name: main
        resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def test_kserve_parallelism_is_per_pod_and_expert_is_a_boolean() -> None:
    report = _check(_kserve(8), engine="vllm==0.33.0")
    assert report.ok, report.text()  # dataLocal 8 x tensor 1 per pod; `expert: true` is valid
    found = _check(_kserve(4), engine="vllm==0.33.0").violations
    assert {v.rule for v in found} == {"TC006"}
    assert all("needs 8 GPUs" in v.message for v in found)


def test_vllm_0_32_refuses_compilation_config_3() -> None:
    text = _deployment(
        "          args: [--model, m, --compilation-config, '3']\n",
        image="vllm/vllm-openai:v0.32.0",
    )
    [v] = _check(text).violations
    assert "--compilation-config" in v.message
    assert "JSON object" in v.message
    assert v.location is not None
    assert v.location.line == _line(text, "--compilation-config")
    assert _check(text.replace("'3'", "'{\"mode\": 3}'")).ok


def test_an_old_release_is_not_checked_against_a_newer_catalog() -> None:
    # --swap-space was a flag of vLLM 0.7; 0.33.0 has none. Neither run flags it.
    text = _deployment(
        "          args: [--model, m, --swap-space, '4']\n", image="vllm/vllm-openai:v0.7.1"
    )
    for engine in (None, "vllm==0.33.0"):
        report = _check(text, engine)
        assert report.ok, report.text()
        assert any("older than every shipped catalog" in u for u in report.unchecked)


# --- render (#39's fidelity bullet) ---------------------------------------------------------


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _engine_pods(text: str) -> list[dict[str, Any]]:
    out = []
    for d in _docs(text):
        if (
            d["kind"] == "Deployment"
            and d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"
        ):
            out.append(d["spec"]["template"]["spec"])
        if d["kind"] == "LeaderWorkerSet":
            group = d["spec"]["leaderWorkerTemplate"]
            out += [group["leaderTemplate"]["spec"], group["workerTemplate"]["spec"]]
    return out


def test_a_two_node_group_is_not_pinned_to_one_hostname(tmp_path: Path) -> None:
    text = GLM.read_text().replace("    tp-size: 4\n", "    tp-size: 8\n    nnodes: 2\n")
    (tmp_path / "tier.yaml").write_text(text)
    rendered = render_kubernetes(load_spec(tmp_path / "tier.yaml"))
    pods = _engine_pods(rendered)
    assert pods
    assert all("kubernetes.io/hostname" not in (p.get("nodeSelector") or {}) for p in pods)
    assert "Not carried: r1: host gpu02 (a group of 2 pods runs on 2 nodes)" in rendered


def test_a_loopback_host_is_no_node_name(tmp_path: Path) -> None:
    (tmp_path / "tier.yaml").write_text(LLAMA.read_text().replace("host: gpu11", "host: localhost"))
    pods = _engine_pods(render_kubernetes(load_spec(tmp_path / "tier.yaml")))
    assert all("nodeSelector" not in p for p in pods)


def test_the_model_volume_and_the_env_file_are_carried(tmp_path: Path) -> None:
    text = LLAMA.read_text().replace(
        "    volumes:\n      - /models:/models:ro\n",
        "    volumes:\n      - /models:/models:ro\n      - hf-cache:/root/.cache/huggingface\n"
        "    env_file: [engine.env]\n",
    )
    text += "\nvolumes:\n  hf-cache: {}\n"
    (tmp_path / "tier.yaml").write_text(text)
    rendered = render_kubernetes(load_spec(tmp_path / "tier.yaml"))
    [pod, *_] = _engine_pods(rendered)
    container = pod["containers"][0]
    assert {m["mountPath"] for m in container["volumeMounts"]} == {
        "/models",
        "/root/.cache/huggingface",
    }
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    ]
    tier = load_spec(tmp_path / "tier.yaml").tier
    assert claims == [f"{tier}-hf-cache"]
    assert container["envFrom"] == [{"secretRef": {"name": f"{tier}-env"}}]
    assert f"Create first: the PersistentVolumeClaim {tier}-hf-cache" in rendered
    assert "--from-env-file=engine.env" in rendered
    report = check_manifests(
        parse_manifests(rendered, "r.yaml"), ["r.yaml"], spec=load_spec(tmp_path / "tier.yaml")
    )
    assert report.ok, report.text()


def test_the_proxy_runs_the_spec_s_own_flags() -> None:
    spec_path = ROOT / "examples/tiny-sglang/tier.yaml"
    spec = load_spec(spec_path)
    [router] = [
        d
        for d in _docs(render_kubernetes(spec))
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-router")
    ]
    c = router["spec"]["template"]["spec"]["containers"][0]
    argv = [*c["command"], *c["args"]]
    own = yaml.safe_load(spec_path.read_text())["services"]["router"]["compose"]["command"]
    # The spec's flags in its order; only the workers (service discovery) and the loopback
    # hosts (a pod is reached on its IP) differ. No --log-level the spec never wrote.
    assert "--log-level" not in argv
    kept = [t for t in own if t not in ("--worker-urls", "{{backends}}", "127.0.0.1")]
    assert [t for t in argv if t in kept] == kept
    assert argv.count("0.0.0.0") == 2
    assert c["ports"][0]["containerPort"] == 18200


def test_validate_of_the_rendering_keeps_the_pin() -> None:
    # The image is pinned by digest (no release in it): the annotation names the release, so
    # a typo is still checked against the spec's catalog, with no --spec and no --engine.
    rendered = render_kubernetes(load_spec(LLAMA))
    assert f"{ENGINE_ANNOTATION}: vllm==0.33.0" in rendered
    broken = rendered.replace("--max-num-batched-tokens", "--max-num-bached-tokens", 1)
    report = _check(broken)
    assert any("--max-num-bached-tokens" in v.message for v in report.violations)
    assert "vllm==0.33.0" in (report.catalog or "")


def test_without_a_pin_validate_falls_back_to_the_newest_catalog_with_a_warning() -> None:
    rendered = render_kubernetes(load_spec(LLAMA))
    unpinned = "\n".join(
        line
        for line in rendered.splitlines()
        if ENGINE_ANNOTATION not in line and line.strip() != "annotations:"
    )
    report = _check(unpinned.replace("--max-num-batched-tokens", "--max-num-bached-tokens", 1))
    assert any("--max-num-bached-tokens" in v.message for v in report.violations)
    assert any("newest shipped catalog" in w.message for w in report.warnings)


@pytest.mark.parametrize(
    "spec_path", sorted((ROOT / "examples").glob("*/tier.yaml")), ids=lambda p: p.parent.name
)
def test_render_import_render_is_argv_exact_and_keeps_host_version_roles(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    first = render_kubernetes(spec)
    back = import_manifests(["-"], stdin=first, tier=spec.tier).spec
    assert back.host == spec.host
    assert back.engine.version == spec.engine.version
    assert {n: r.role for n, r in back.replicas.items()} == {
        n: r.role for n, r in spec.replicas.items()
    }

    def pods(text: str) -> list[Any]:
        return [({k: v for k, v in p.items()}) for p in _engine_pods(text)]

    assert pods(render_kubernetes(back)) == pods(first)


# --- import --------------------------------------------------------------------------------


def test_a_script_with_other_commands_is_refused_located(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # It exited 0 "the same flags", writing a Deployment that ran `set -x apt-get ...`.
    path = _write(tmp_path, _deployment(SCRIPT.replace("utilisation", "utilization")))
    result = run_cli("import", str(path))
    assert result.code == 2
    assert f"{path}:" in result.err
    assert "shell script with other commands" in result.err
    assert "same flags" not in result.err


def test_an_engine_only_script_imports_with_its_variables_filled_in(tmp_path: Path) -> None:
    text = _deployment(
        '          command: [sh, -c]\n          args: ["exec vllm serve m --port ${PORT}"]\n'
        '          env: [{name: PORT, value: "8000"}]\n'
    )
    spec = import_manifests([_write(tmp_path, text)]).spec
    assert spec.engine.args["port"] == "8000"
    [pod] = _engine_pods(render_kubernetes(spec))
    assert pod["containers"][0]["command"] == ["vllm", "serve"]  # the engine, not `exec`


def test_a_variable_the_spec_cannot_give_is_refused_located(tmp_path: Path) -> None:
    text = _deployment(
        "          args: [--model, m, --host, $(POD_IP)]\n"
        "          env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]\n"
    )
    with pytest.raises(InputError) as caught:
        import_manifests([_write(tmp_path, text)])
    assert "status.podIP" in str(caught.value)
    assert caught.value.location is not None
    assert caught.value.location.line == _line(text, "$(POD_IP)")


def test_kubelet_variables_expand_from_literal_env(tmp_path: Path) -> None:
    text = _deployment(
        "          args: [--model, m, --tensor-parallel-size, $(TP)]\n"
        '          env: [{name: TP, value: "1"}]\n'
    )
    assert (
        import_manifests([_write(tmp_path, text)]).spec.engine.args["tensor-parallel-size"] == "1"
    )


def test_placement_keeps_the_file_s_selector_and_invents_no_localhost(tmp_path: Path) -> None:
    text = _deployment(
        "          args: [--model, m]\n",
        pod="      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}\n"
        "      tolerations: [{key: dedicated, operator: Exists}]\n",
    )
    spec = import_manifests([_write(tmp_path, text)]).spec
    [pod] = _engine_pods(render_kubernetes(spec))
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert {"key": "dedicated", "operator": "Exists"} in pod["tolerations"]


def test_image_and_version_must_agree(tmp_path: Path) -> None:
    path = _write(
        tmp_path, _deployment("          args: [--model, m]\n", image="vllm/vllm-openai:v0.32.0")
    )
    with pytest.raises(InputError) as caught:
        import_manifests([path], engine="vllm==0.33.0")
    assert "runs vLLM 0.32.0, but `engine` names 0.33.0" in str(caught.value)
    assert caught.value.location is not None
    assert caught.value.location.line == _line(path.read_text(), "image:")
    assert import_manifests([path]).spec.engine.version == "0.32.0"


def test_latest_takes_engine_and_no_message_names_a_missing_tier_yaml(tmp_path: Path) -> None:
    path = _write(
        tmp_path, _deployment("          args: [--model, m]\n", image="vllm/vllm-openai:latest")
    )
    with pytest.raises(InputError) as caught:
        import_manifests([path])
    message = str(caught.value)
    assert "names no release" in message
    assert "tier.yaml" not in message
    assert caught.value.location is not None
    assert caught.value.location.file == str(path)
    result = import_manifests([path], engine="vllm==0.33.0")
    assert result.spec.engine.version == "0.33.0"
    assert result.spec.engine.image == "vllm/vllm-openai:latest"
    assert any("names no release" in n for n in result.notes)


def test_no_image_says_so_not_the_image_none(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        import_manifests([_write(tmp_path, _kserve(8))])
    assert "None" not in str(caught.value)
    assert "no image is given" in str(caught.value)


# --- NVIDIA Dynamo's workers (python3 -m dynamo.vllm / dynamo.sglang) -------------------


def _dynamo(args: str, *, image: str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1") -> str:
    """A v1alpha1 DynamoGraphDeployment with one vLLM worker; ``args`` at 12 spaces."""
    return (
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n  name: g\n"
        "spec:\n  services:\n    VllmWorker:\n      componentType: worker\n"
        '      resources:\n        limits:\n          gpu: "1"\n'
        f"      extraPodSpec:\n        mainContainer:\n          image: {image}\n"
        f"          command: [python3, -m, dynamo.vllm]\n          args:\n{args}"
    )


def test_a_dynamo_worker_is_vllm_and_its_own_flags_are_not_judged() -> None:
    # Dynamo's workers were no engine at all: their vLLM flags went unchecked.
    text = _dynamo(
        "            - --model\n            - Qwen/Qwen3-0.6B\n"
        "            - --is-prefill-worker\n            - --connector\n            - nixl\n"
        "            - --max-model-len\n            - '4096'\n"
    )
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert (e.profile.kind, e.wrapper) == ("vllm", ("python3", "-m", "dynamo.vllm"))
    report = _check(text)
    assert report.violations == ()
    assert not any("is-prefill-worker" in w.message for w in report.warnings)
    # The image tag is Dynamo's release (1.3.1), not vLLM's: said, and not read as vLLM 1.3.1.
    [note] = [w for w in report.warnings if "newest shipped catalog" in w.message]
    assert "NVIDIA Dynamo's release" in note.message
    assert "vllm 1.3.1" not in note.message
    # --engine judges the vLLM flags against the release it names, without a version clash.
    assert _check(text, engine="vllm==0.33.0").violations == ()


def test_a_typo_in_a_dynamo_worker_is_caught_on_its_line() -> None:
    text = _dynamo(
        "            - --model\n            - Qwen/Qwen3-0.6B\n            - --max-modle-len\n"
    )
    hits = [v for v in _check(text).violations if v.rule == "TC004"]
    assert [(v.location.line if v.location else None) for v in hits] == [text.count("\n")]
    assert "--max-modle-len" in hits[0].message


def test_a_dynamo_worker_in_a_shell_script_is_found() -> None:
    # Dynamo 0.4's examples: command [/bin/sh, -c], args ["python3 -m dynamo.vllm ... | tee"].
    text = _dynamo(
        "            - python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --enforce-eagr 2>&1 | tee /tmp/l\n"
    ).replace("command: [python3, -m, dynamo.vllm]", "command: [/bin/sh, -c]")
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert e.shell
    assert e.wrapper == ("python3", "-m", "dynamo.vllm")
    assert [v.rule for v in _check(text).violations] == ["TC004"]


def test_import_refuses_a_dynamo_worker_located_and_leaves_it_out_beside_an_engine() -> None:
    text = _dynamo("            - --model\n            - Qwen/Qwen3-0.6B\n")
    with pytest.raises(InputError) as caught:
        import_manifests(["-"], stdin=text, engine="vllm==0.33.0")
    assert "NVIDIA Dynamo's worker" in str(caught.value)
    assert caught.value.location is not None
    assert (
        caught.value.location.line
        == text.splitlines().index("          command: [python3, -m, dynamo.vllm]") + 1
    )
    # Beside a vLLM server of its own, the Dynamo worker is left out with a note.
    both = text + "---\n" + _deployment("          args: [--model, m, --max-model-len, '4096']\n")
    result = import_manifests(["-"], stdin=both)
    assert list(result.spec.replicas) == ["eng"]
    assert any("inside NVIDIA Dynamo's worker: not imported" in n for n in result.notes)


@pytest.mark.parametrize(
    "tail", ["2>&1 | tee /tmp/log", "> /tmp/log 2>&1", "&> /tmp/log", "2>/dev/null"]
)
def test_a_script_with_a_redirection_ends_and_the_redirection_is_no_command(tail: str) -> None:
    # `2>&1` split no word, so the script reader looped for ever (validate hung).
    text = _deployment(
        f"          command: [/bin/sh, -c]\n          args: ['vllm serve m --max-model-len 4096 {tail}']\n"
    )
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert e.argv == ("vllm", "serve", "m", "--max-model-len", "4096")
    assert all(c[0] == "tee" for c in e.script_other)


def test_sh_c_given_the_engine_word_by_word_is_a_violation() -> None:
    # Dynamo 0.4's SGLang example: `command: [/bin/sh, -c]`, `args: [python3, -m, ...]`:
    # the shell runs `python3` alone, the rest are $0, $1...; nothing said so.
    text = _deployment(
        "          command: [/bin/sh, -c]\n"
        "          args: [python3, -m, vllm.entrypoints.openai.api_server, --model, m]\n"
    )
    [v] = [v for v in _check(text).violations if "sh -c" in v.message]
    assert v.location is not None
    assert v.location.line == text.count("\n")
    assert "runs only 'python3'" in v.message
    # One script string is what a shell runs: no finding.
    whole = _deployment(
        "          command: [/bin/sh, -c]\n"
        "          args: ['python3 -m vllm.entrypoints.openai.api_server --model m']\n"
    )
    assert not [v for v in _check(whole).violations if "sh -c" in v.message]


def test_ome_runtimes_runner_containers_are_engine_sites() -> None:
    # OME's ClusterServingRuntime puts its container under `runner` (no `containers` list):
    # its engines were never found, so nothing was checked.
    text = (
        "apiVersion: ome.io/v1beta1\nkind: ClusterServingRuntime\nmetadata:\n  name: rt\n"
        "spec:\n  engineConfig:\n    leader:\n      runner:\n        name: ome-container\n"
        "        image: lmsysorg/sglang:v0.5.23\n"
        "        command: [python3, -m, sglang.launch_server, --model-path, m, --tp-sise, '8']\n"
        "    worker:\n      size: 1\n      runner:\n        name: ome-container\n"
        "        image: lmsysorg/sglang:v0.5.23\n"
        "        command: [python3, -m, sglang.launch_server, --model-path, m]\n"
    )
    found = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert [(e.site.role, e.site.nodes, e.path[-1]) for e in found] == [
        ("leader", 2, "runner"),
        ("worker", 2, "runner"),
    ]
    [typo] = [v for v in _check(text).violations if v.rule == "TC004"]
    assert "--tp-sise" in typo.message
    assert typo.location is not None
    assert typo.location.line == 11


def test_under_a_guessed_catalog_a_removed_flag_is_no_typo_but_a_misspelling_is() -> None:
    # `--enable-deepep-moe` (SGLang 0.4's, gone before the oldest catalog) was called a typo
    # of `--deepep-mode` on an unpinned `:dev` image; a flag two edits from one is.
    def on_dev(flag: str) -> Any:
        return _check(
            _deployment(
                f"          command: [python3, -m, sglang.launch_server, --model-path, m, {flag}]\n",
                image="lmsysorg/sglang:dev",
            )
        )

    removed = on_dev("--enable-deepep-moe")
    assert not [v for v in removed.violations if v.rule == "TC004"]
    assert any("--enable-deepep-moe" in w.message for w in removed.warnings)
    assert [v.rule for v in on_dev("--enable-metircs").violations] == ["TC004"]
    assert [v.rule for v in on_dev("--enable-metrcs").violations] == ["TC004"]
    # A pinned release that lacks it refuses it (SGLang 0.5.23's parser does).
    pinned = _check(
        _deployment(
            "          command: [python3, -m, sglang.launch_server, --model-path, m, "
            "--enable-deepep-moe]\n",
            image="lmsysorg/sglang:v0.5.23",
        )
    )
    assert [v.rule for v in pinned.violations] == ["TC004"]


def test_llmaz_backend_runtime_configs_and_its_service_are_engine_sites() -> None:
    # llmaz's BackendRuntime writes `command` once and `args` per recommended config; its
    # inference.llmaz.io `Service` was skipped as a core Service (no pods).
    runtime = (
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: BackendRuntime\nmetadata:\n"
        "  name: vllm\nspec:\n  command: [python3, -m, vllm.entrypoints.openai.api_server]\n"
        "  image: vllm/vllm-openai\n  version: v0.33.0\n  recommendedConfigs:\n"
        "    - name: default\n      args:\n        - --model\n        - m\n"
        "        - --max-modle-len\n        - '4096'\n"
    )
    [e] = [e for m in parse_manifests(runtime, "m.yaml") for e in engine_containers(m)]
    assert e.container["image"] == "vllm/vllm-openai:v0.33.0"
    [typo] = [v for v in _check(runtime).violations if v.rule == "TC004"]
    assert typo.location is not None
    assert typo.location.line == 14
    service = (
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Service\nmetadata:\n  name: s\n"
        "spec:\n  workloadTemplate:\n    size: 2\n    leaderTemplate:\n      spec:\n"
        "        containers:\n          - name: r\n            image: lmsysorg/sglang:v0.5.23\n"
        "            command: [python3, -m, sglang.launch_server, --model-path, m]\n"
        "    workerTemplate:\n      spec:\n        containers:\n          - name: r\n"
        "            image: lmsysorg/sglang:v0.5.23\n"
        "            command: [python3, -m, sglang.launch_server, --model-path, m]\n"
    )
    found = [e for m in parse_manifests(service, "m.yaml") for e in engine_containers(m)]
    assert [(e.site.role, e.site.nodes) for e in found] == [("leader", 2), ("worker", 2)]
    # A core Service still holds no pod.
    core = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports: [{port: 1}]\n"
    assert not [e for m in parse_manifests(core, "m.yaml") for e in engine_containers(m)]


def test_an_ngc_tag_is_nvidias_release_not_the_engines() -> None:
    # `nvcr.io/nvidia/vllm:26.02-py3` was read as vLLM 26.02: import refused `--engine
    # vllm==0.33.0` ("runs vLLM 26.02"), and validate looked for a catalog of 26.02.
    text = _deployment(
        "          command: [python3, -m, vllm.entrypoints.openai.api_server]\n"
        "          args: [--model, m, --max-model-len, '4096']\n",
        image="nvcr.io/nvidia/vllm:26.02-py3",
    )
    assert not any(
        "26.02" in w.message and "vllm 26.02" in w.message for w in _check(text).warnings
    )
    result = import_manifests(["-"], stdin=text, engine="vllm==0.33.0")
    assert result.spec.engine.version == "0.33.0"


def _lws_worker_only(script: str) -> str:
    """An LWS of two pods from one workerTemplate (no leaderTemplate), `bash -c` ``script``
    (its lines at 14 spaces)."""
    return (
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: w\n"
        "spec:\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n      spec:\n"
        "        containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.33.0\n"
        "          command: [/bin/bash, -c]\n          args:\n            - |-\n" + script
    )


def test_a_script_with_arithmetic_is_read_and_its_typo_located() -> None:
    # llm-d's wide-EP: `START_RANK=$(( ... ))` and `--data-parallel-size $((A * B))`: the
    # splitter refused the parentheses and the whole script, engine included, was dropped.
    script = (
        "              START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))\n"
        "              exec vllm serve m \\\n"
        "                --data-parallel-size $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) \\\n"
        "                --data-parallel-start-rank $START_RANK \\\n"
        "                --enforce-eagre\n"
    )
    text = _lws_worker_only(script)
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert "$((LWS_GROUP_SIZE * DP_SIZE_LOCAL))" in e.argv
    # One template for every pod of the group: the leader's too, so not a "worker" only.
    assert e.site.role == ""
    report = _check(text)
    [typo] = [v for v in report.violations if v.rule == "TC004"]
    assert typo.location is not None
    assert typo.location.line == text.count("\n")
    # The arithmetic is the shell's value, not a string where an integer belongs.
    assert not any("expects an integer" in w.message for w in report.warnings)


def test_a_script_variable_holding_flags_is_read_from_its_env_value() -> None:
    # `vllm serve ... $EXTRA_FLAGS` with EXTRA_FLAGS a literal string of flags: the shell
    # splits it into flags, which went unchecked, and import attached the whole string to
    # --port as a second value.
    text = _deployment(
        "          command: [/bin/sh, -c]\n"
        "          args: ['vllm serve --model m --port 8000 $EXTRA_FLAGS']\n"
        "          env:\n            - name: EXTRA_FLAGS\n"
        "              value: '--max-model-len 4096 --enforce-eagre'\n"
    )
    [typo] = [v for v in _check(text).violations if v.rule == "TC004"]
    assert "--enforce-eagre" in typo.message
    assert typo.location is not None
    assert typo.location.line == text.count("\n")  # the env value's line
    fixed = text.replace("--enforce-eagre", "--enforce-eager")
    result = import_manifests(["-"], stdin=fixed)
    args = result.spec.engine.args
    assert (args["port"], args["max-model-len"], args["enforce-eager"]) == ("8000", "4096", True)


def test_a_dynamo_worker_given_one_script_string_as_args_is_found() -> None:
    # Dynamo's docs: `args: ["python3 -m dynamo.vllm --model ..."]`, no command (the operator
    # runs it through /bin/sh -c); it was no engine, so its flags went unchecked.
    text = _dynamo("            - python3 -m dynamo.vllm --model m --max-modle-len 4096\n").replace(
        "          command: [python3, -m, dynamo.vllm]\n", ""
    )
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert e.wrapper == ("python3", "-m", "dynamo.vllm")
    assert [v.rule for v in _check(text).violations] == ["TC004"]


def test_set_dash_dash_then_exec_positional_is_the_engine_command() -> None:
    # A Dynamo recipe's idiom: `set -- python3 -m dynamo.vllm ...`, flags appended by a
    # `case`, then `exec "$@"`: the engine was never found.
    script = (
        "              set -eu\n"
        "              set -- vllm serve m \\\n"
        "                --max-modle-len 4096\n"
        '              case "$CELL" in B) set -- "$@" --enforce-eager ;; esac\n'
        '              exec "$@"\n'
    )
    text = _lws_worker_only(script)
    [e] = [e for m in parse_manifests(text, "m.yaml") for e in engine_containers(m)]
    assert e.argv[:3] == ("vllm", "serve", "m")
    [typo] = [v for v in _check(text).violations if v.rule == "TC004"]
    assert typo.location is not None
    assert typo.location.line == text.count("\n") - 2
    # Without `exec "$@"` the positional parameters run nothing.
    bare = _lws_worker_only(script.replace('              exec "$@"\n', ""))
    assert not [e for m in parse_manifests(bare, "m.yaml") for e in engine_containers(m)]


def test_a_dynamo_workers_tp_is_fitted_to_its_services_gpus() -> None:
    # The service-level `resources.limits.gpu` of a Dynamo worker holds its TP (the recipe in
    # the public corpus gives TP 4 four GPUs); TP 2 on 1 GPU is a located violation.
    text = _dynamo(
        "            - --model\n            - m\n            - --tensor-parallel-size\n            - '2'\n"
    )
    [fit] = [v for v in _check(text).violations if v.rule == "TC006"]
    assert "needs 2 GPUs" in fit.message
    assert _check(text.replace('gpu: "1"', 'gpu: "2"')).violations == ()
