"""Mutation tests of ``validate`` on Kubernetes manifests: each defect the issue names, put
into a clean rendering (or an LWS written by hand), is caught with a message located to the
manifest line that holds it; the untouched rendering is clean."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tierctl.contracts.kubernetes import KubeCheck, check_manifests
from tierctl.contracts.report import Report
from tierctl.kubernetes import parse_manifests
from tierctl.render.kubernetes import render_kubernetes
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
GLM = ROOT / "examples/glm53-long-context/tier.yaml"
LLAMA = ROOT / "examples/vllm-llama70b/tier.yaml"

Docs = list[dict[str, Any]]


def _render(path: Path) -> Docs:
    return [d for d in yaml.safe_load_all(render_kubernetes(load_spec(path), path)) if d]


def _text(docs: Docs) -> str:
    return "---\n".join(dump_yaml(d) for d in docs)


def _check(text: str, spec: Path | None = None, **kw: Any) -> Report:
    return check_manifests(
        parse_manifests(text, "m.yaml"),
        ["m.yaml"],
        spec=load_spec(spec) if spec else None,
        settings=KubeCheck(**kw),
    )


def _engine(docs: Docs, replica: str) -> dict[str, Any]:
    d = next(d for d in docs if d["metadata"]["labels"].get("tierctl/replica") == replica)
    container: dict[str, Any] = d["spec"]["template"]["spec"]["containers"][0]
    return container


def _line_of(text: str, needle: str, nth: int = 0) -> int:
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return lines[nth]


def _set_arg(container: dict[str, Any], flag: str, value: str) -> None:
    args = container["args"]
    args[args.index(flag) + 1] = value


@pytest.mark.parametrize("path", [GLM, LLAMA], ids=["sglang", "vllm"])
def test_the_rendering_itself_is_clean(path: Path) -> None:
    report = _check(_text(_render(path)), path)
    assert report.ok, report.text()


def test_the_canary_flag_on_the_control_is_argv_drift_naming_the_canary() -> None:
    docs = _render(GLM)
    _set_arg(_engine(docs, "r1"), "--prefill-decode-interval", "2")
    text = _text(docs)
    report = _check(text, GLM)
    [v] = report.violations
    assert v.rule == "TC001"
    assert "replica r1: --prefill-decode-interval expected '1', found '2'" in v.message
    assert "(the value of canary r2)" in v.message
    # Located at the flag's token in r1's args (the first Deployment).
    assert v.location is not None
    assert v.location.line == _line_of(text, "--prefill-decode-interval")


def test_a_typo_in_an_lws_arg_is_an_unknown_flag_with_did_you_mean() -> None:
    docs = _render(GLM)
    deployment = docs[0]
    template = deployment["spec"]["template"]
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "glm"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 1,
                "leaderTemplate": template,
                "workerTemplate": template,
            },
        },
    }
    args = template["spec"]["containers"][0]["args"]
    args[args.index("--chunked-prefill-size")] = "--chunked-prefil-size"
    text = _text([lws])
    # The image names no release: the catalog is given, as `validate --engine` does.
    report = _check(text, engine="sglang==0.5.23")
    typos = [v for v in report.violations if v.rule == "TC004"]
    assert len(typos) == 2  # in the leader template and in the worker template
    assert all("--chunked-prefil-size" in v.message for v in typos)
    assert all("--chunked-prefill-size" in (v.fix or "") for v in typos)
    lines = [v.location.line for v in typos if v.location]
    assert lines == [
        _line_of(text, "--chunked-prefil-size", 0),
        _line_of(text, "--chunked-prefil-size", 1),
    ]


def test_a_gpu_count_that_does_not_fit_the_parallel_sizes() -> None:
    docs = _render(LLAMA)
    _engine(docs, "r2")["resources"]["limits"]["nvidia.com/gpu"] = 4
    text = _text(docs)
    report = _check(text, LLAMA)
    [v] = report.violations
    assert v.rule == "TC006"
    assert "needs 8 GPUs" in v.message
    assert "only 4" in v.message
    assert v.location is not None
    assert v.location.line == _line_of(text, "resources:", 1)


def test_a_liveness_probe_on_health_with_a_one_second_timeout() -> None:
    docs = _render(GLM)
    engine = _engine(docs, "r2")
    engine["livenessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 1}
    text = _text(docs)
    report = _check(text, GLM)
    [v] = report.violations
    assert v.rule == "TC006"
    assert "liveness probe gives up after 1 s" in v.message
    assert v.location is not None
    assert v.location.line == _line_of(text, "livenessProbe:", 1)


def test_a_liveness_probe_without_a_startup_probe_kills_a_loading_engine() -> None:
    docs = _render(GLM)
    engine = _engine(docs, "r1")
    del engine["startupProbe"]
    report = _check(_text(docs), GLM)
    [v] = report.violations
    assert "no startup probe" in v.message
    assert "900 s" in v.message


def test_a_literal_token_is_caught_and_not_shown() -> None:
    docs = _render(GLM)
    engine = _engine(docs, "r2")
    secret = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3"
    engine["env"] = [*engine["env"][:2], {"name": "HF_TOKEN", "value": secret}]
    text = _text(docs)
    report = _check(text, GLM)
    [v] = report.violations
    assert v.rule == "TC006"
    assert "HF_TOKEN carries a literal credential" in v.message
    assert secret not in report.text()
    assert secret not in report.to_json()
    assert v.location is not None
    assert v.location.line == _line_of(text, secret)


def test_a_flag_in_an_env_string_of_extra_args_is_checked_where_it_is_written() -> None:
    docs = _render(LLAMA)
    engine = _engine(docs, "r1")
    engine["env"].append(
        {"name": "VLLM_ADDITIONAL_ARGS", "value": "--enable-prefix-cashing --max-loras 2"}
    )
    text = _text(docs)
    report = _check(text, engine="vllm==0.33.0")
    [v] = [v for v in report.violations if v.rule == "TC004"]
    assert "--enable-prefix-cashing" in v.message
    assert v.location is not None
    assert v.location.line == _line_of(text, "--enable-prefix-cashing")


def test_a_variant_label_that_lies_about_the_flags() -> None:
    docs = _render(GLM)
    d = docs[2]  # r2's Deployment
    d["spec"]["template"]["metadata"]["labels"]["config_variant"] = "long-context-pdi1"
    report = _check(_text(docs), GLM)
    assert [v.rule for v in report.violations] == ["TC002"]


def test_an_unknown_field_is_refused_by_the_strict_core_schema() -> None:
    docs = _render(GLM)
    docs[0]["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    text = _text(docs)
    report = _check(text, GLM)
    [v] = report.violations
    assert v.rule == "TC007"
    assert "livenesProbe" in v.message
    assert "strict" in v.message
    assert v.location is not None
    assert v.location.line == _line_of(text, "livenesProbe")


def test_a_custom_resource_field_of_the_wrong_type_is_refused() -> None:
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "p"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "targetPorts": [{"number": "8000"}],
            "endpointPickerRef": {"name": "epp"},
        },
    }
    report = _check(_text([pool]))
    [v] = report.violations
    assert v.rule == "TC007"
    assert "'8000' is not of type 'integer'" in v.message


MUTATIONS: dict[str, Callable[[Docs], None]] = {
    "typo": lambda d: _engine(d, "r1")["args"].__setitem__(0, "--model-pth"),
    "gpus": lambda d: _engine(d, "r1")["resources"]["limits"].__setitem__("nvidia.com/gpu", 2),
    "probe": lambda d: _engine(d, "r1")["livenessProbe"].__setitem__("timeoutSeconds", 1),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_fails_the_cli_exit_code(name: str) -> None:
    docs = _render(GLM)
    MUTATIONS[name](docs)
    assert _check(_text(docs), GLM).exit_code == 1


def test_a_pairing_rule_broken_in_a_workload() -> None:
    docs = _render(GLM)
    engine = _engine(docs, "r2")
    engine["env"] = [e for e in engine["env"] if e["name"] != "SGLANG_DSA_INDEXER_QSPLIT"]
    report = _check(_text(docs), GLM)
    [v] = report.violations
    assert v.rule == "TC005"
    assert "chunk16k-needs-qsplit" in v.message
    assert "SGLANG_DSA_INDEXER_QSPLIT=1" in v.message
