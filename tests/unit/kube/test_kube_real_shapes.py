"""Regressions from manifests shaped after public files (tests/fixtures/kube_corpus/15-21):
each test failed before the fix it names, and each keeps a real problem caught."""

from __future__ import annotations

from pathlib import Path

from tierctl.adopt.kubernetes import import_manifests
from tierctl.contracts.kubernetes import KubeCheck, check_manifests
from tierctl.kubernetes import parse_manifests
from tierctl.kubernetes.containers import engine_containers

CORPUS = Path(__file__).resolve().parents[2] / "fixtures/kube_corpus"


def _report(text: str, name: str = "m.yaml"):  # type: ignore[no-untyped-def]
    return check_manifests(parse_manifests(text, name), [name])


def _text(name: str) -> str:
    return (CORPUS / name).read_text()


def test_vllm_underscore_parallel_flags_count_toward_the_gpu_fit() -> None:
    # LWS's vLLM GPU example writes --pipeline_parallel_size; it was read as PP 1, so 8 x 2
    # over 2 pods "needed 4" and the correct 8 GPUs per pod were a violation.
    text = _text("15-lws-vllm-gpu-shell.yaml")
    assert not [v for v in _report(text).violations if v.rule == "TC006"]
    # Still caught: 8 x 2 over a 2-pod group is 8 per pod, not 16.
    wrong = text.replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "16"', 1)
    fits = [v for v in _report(wrong).violations if v.rule == "TC006"]
    assert fits
    assert "needs 8 GPUs" in fits[0].message


def test_kubelet_env_references_in_args_are_expanded_for_the_gpu_fit() -> None:
    # `--tp $(TP_SIZE)` with TP_SIZE in the container's env: the kubelet expands it; it was
    # "not checked: a parallelism flag is not a number".
    text = _text("17-shell-string-args.yaml")
    report = _report(text)
    assert not any("not a number" in u for u in report.unchecked), report.unchecked
    wrong = text.replace(
        '- name: TP_SIZE\n          value: "1"', '- name: TP_SIZE\n          value: "2"'
    )
    assert wrong != text
    fits = [v for v in _report(wrong).violations if v.rule == "TC006"]
    assert fits
    assert "needs 2 GPUs" in fits[0].message


def test_an_env_reference_to_a_secret_stays_unchecked_not_guessed() -> None:
    text = _text("17-shell-string-args.yaml").replace(
        '- name: TP_SIZE\n          value: "1"',
        "- name: TP_SIZE\n          valueFrom:\n            configMapKeyRef: {name: c, key: tp}",
    )
    assert any("not a number" in u for u in _report(text).unchecked)


def test_dynamo_v1beta1_components_are_engine_sites() -> None:
    # v1beta1 lists `components` with a podTemplate; only v1alpha1's `services` was read, so
    # the SGLang worker's flags and GPUs went unchecked.
    text = _text("19-dynamo-v1beta1.yaml")
    found = [e for m in parse_manifests(text, "d.yaml") for e in engine_containers(m)]
    assert [e.container["name"] for e in found] == ["main", "main"]
    # Dynamo's vLLM worker (python3 -m dynamo.vllm) is vLLM inside Dynamo's wrapper.
    assert [(e.profile.kind, e.wrapper) for e in found] == [
        ("vllm", ("python3", "-m", "dynamo.vllm")),
        ("sglang", ()),
    ]
    wrong = text.replace('nvidia.com/gpu: "2"', 'nvidia.com/gpu: "1"')
    fits = [v for v in _report(wrong).violations if v.rule == "TC006"]
    assert fits
    assert fits[0].location is not None
    assert "components[2]" in str(fits[0].location.path)


def test_a_dynamo_v1beta1_engine_without_gpus_does_not_crash() -> None:
    # The GPU count fell back to v1alpha1's spec.services[NAME] and raised KeyError.
    text = _text("19-dynamo-v1beta1.yaml").replace(
        '          resources:\n            limits:\n              nvidia.com/gpu: "2"\n', ""
    )
    report = _report(text)
    assert any("no nvidia.com/gpu given" in u for u in report.unchecked), report.unchecked


def test_pods_inside_a_kind_without_a_schema_are_still_checked() -> None:
    # DisaggregatedSet (LWS's newer API): the schema step said "its containers still are",
    # but no pod spec was found, so a typo and a literal token passed.
    text = _text("21-lws-disaggregatedset.yaml")
    found = [e for m in parse_manifests(text, "d.yaml") for e in engine_containers(m)]
    assert len(found) == 2
    leaked = text.replace(
        "                  resources:\n",
        "                  env:\n                    - name: HF_TOKEN\n"
        "                      value: hf_abcdefghijklmnopqrstuvwxyz0123456789\n"
        "                  resources:\n",
        1,
    )
    secrets = [v for v in _report(leaked).violations if "hf_abc" not in v.message]
    assert any(v.rule == "TC006" and "HF_TOKEN" in v.message for v in secrets), secrets


def test_import_names_the_containers_of_another_engine_it_leaves_out(tmp_path: Path) -> None:
    # A file with a vLLM and an SGLang Deployment imported the vLLM one and dropped the other
    # without a word.
    result = import_manifests([CORPUS / "17-shell-string-args.yaml"])
    assert list(result.spec.replicas) == ["mistral-7b"]
    assert any("sglang-qwen" in n and "not imported" in n for n in result.notes), result.notes


def test_kserve_containers_without_an_image_run_their_runtimes_engine() -> None:
    # KServe's samples give `main` only args (the runtime config gives image and command): no
    # engine was found, so their flags went unchecked and import refused the file.
    text = _text("18-kserve-v1alpha2-runtime.yaml")
    found = [e for m in parse_manifests(text, "k.yaml") for e in engine_containers(m)]
    assert [e.profile.kind for e in found] == ["vllm", "sglang"]  # default, then `runtime:`
    broken = text.replace("--trust-remote-code", "--trust-remote-cod3")
    report = check_manifests(
        parse_manifests(broken, "k.yaml"), ["k.yaml"], settings=KubeCheck(engine="sglang==0.5.23")
    )
    typos = [v for v in report.violations if v.rule == "TC004"]
    assert typos
    assert "--trust-remote-cod3" in typos[0].message
    assert typos[0].location is not None
    assert "--trust-remote-cod3" in broken.splitlines()[typos[0].location.line - 1]
    # Without `engine`, the newest shipped catalog stands in, and a warning says so (as
    # compose's validate does for an unpinned tag): the typo is still caught.
    without = check_manifests(parse_manifests(broken, "k.yaml"), ["k.yaml"])
    assert any("--trust-remote-cod3" in v.message for v in without.violations)
    notes = [w.message for w in without.warnings if w.rule == "TC004"]
    assert any("newest shipped catalog" in n and "no image is given" in n for n in notes), notes


def test_kserve_without_an_image_imports_with_the_releases_image() -> None:
    result = import_manifests([CORPUS / "18-kserve-v1alpha2-runtime.yaml"], engine="vllm==0.32.0")
    assert result.spec.engine.image == "vllm/vllm-openai:v0.32.0"
    assert any("no image in the manifests" in n for n in result.notes)
    assert result.differences == []


def test_rbg_v1alpha2_roles_wrap_their_pod_template_in_a_pattern() -> None:
    # v1alpha2 puts a role's template under standalonePattern (or leaderWorkerPattern); only
    # v1alpha1's roles[].template was read, so no engine was found and import refused.
    text = _text("22-rbg-v1alpha2-standalone.yaml")
    found = [e for m in parse_manifests(text, "r.yaml") for e in engine_containers(m)]
    assert [e.container["name"] for e in found] == ["prefill", "decode"]
    wrong = text.replace(
        '- "1"\n                resources:\n                  limits:',
        '- "2"\n                resources:\n                  limits:',
    )
    assert wrong != text
    fits = [v for v in _report(wrong).violations if v.rule == "TC006"]
    assert fits
    assert fits[0].location is not None
    assert "standalonePattern" in str(fits[0].location.path)
