"""``render --target kubernetes``: the bundled examples render to objects the real schemas
accept, one workload per replica, the canary's flag on the canary alone, probes from the
engine profile, secrets by reference only, deterministic bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tierctl.contracts.kubernetes import check_manifests
from tierctl.engines import profile_for
from tierctl.kubernetes import parse_manifests
from tierctl.render.kubernetes import (
    MIN_LIVENESS_TIMEOUT_S,
    MIN_LIVENESS_WINDOW_S,
    kube_objects,
    kube_output_name,
    render_kubernetes,
)
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*/tier.yaml"))


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.parent.name)
def test_each_example_renders_and_validates_clean_in_strict_mode(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    text = render_kubernetes(spec, spec_path)
    assert text == render_kubernetes(spec, spec_path)  # deterministic
    report = check_manifests(parse_manifests(text, "k8s.yaml"), ["k8s.yaml"], spec=spec)
    assert report.ok, report.text()
    assert report.replicas_checked == len(spec.replicas)


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.parent.name)
def test_one_workload_per_replica_carrying_its_variant_and_role(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    docs = _docs(render_kubernetes(spec, spec_path))
    workloads = [d for d in docs if d["metadata"]["labels"].get("tierctl/replica")]
    workloads = [d for d in workloads if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    assert [d["metadata"]["labels"]["tierctl/replica"] for d in workloads] == list(spec.replicas)
    for d in workloads:
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert labels["tierctl/role"] == (spec.replicas[labels["tierctl/replica"]].role or "none")
        assert spec.telemetry.label in labels


def test_the_canary_flag_lands_on_the_canary_alone() -> None:
    path = ROOT / "examples/glm53-long-context/tier.yaml"
    docs = _docs(render_kubernetes(load_spec(path), path))
    args = {
        d["metadata"]["labels"]["tierctl/replica"]: d["spec"]["template"]["spec"]["containers"][0][
            "args"
        ]
        for d in docs
        if d["kind"] == "Deployment" and "tierctl/replica" in d["metadata"]["labels"]
    }
    at = {r: a[a.index("--prefill-decode-interval") + 1] for r, a in args.items()}
    assert at == {"r1": "1", "r2": "2"}


def test_probes_come_from_the_profile_and_survive_a_load_and_a_burst() -> None:
    path = ROOT / "examples/glm53-long-context/tier.yaml"
    spec = load_spec(path)
    profile = profile_for(spec.engine.kind)
    deployment = next(d for d in kube_objects(spec).objects if d["kind"] == "Deployment")
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    assert engine["startupProbe"]["httpGet"]["path"] == profile.health_path
    assert engine["readinessProbe"]["httpGet"]["path"] == profile.readiness_path
    startup = engine["startupProbe"]
    # The spec's healthcheck start_period (900 s) is the load budget.
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 900
    live = engine["livenessProbe"]
    assert live["timeoutSeconds"] >= MIN_LIVENESS_TIMEOUT_S
    assert live["failureThreshold"] * live["periodSeconds"] >= MIN_LIVENESS_WINDOW_S
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/hostname": "gpu02"
    }


def test_secrets_are_references_never_values() -> None:
    path = ROOT / "examples/glm53-long-context/tier.yaml"
    text = render_kubernetes(load_spec(path), path)
    docs = _docs(text)
    engine = docs[0]["spec"]["template"]["spec"]["containers"][0]
    token = next(e for e in engine["env"] if e["name"] == "HF_TOKEN")
    assert token == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "glm53-long-context-secrets", "key": "HF_TOKEN"}},
    }
    assert "GATEWAY_TOKEN" not in text  # the registrar is not rendered, and names no value


def test_a_loopback_listen_address_becomes_the_pod_ip() -> None:
    path = ROOT / "examples/tiny-vllm/tier.yaml"
    docs = _docs(render_kubernetes(load_spec(path), path))
    args = docs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--host") + 1] == "0.0.0.0"


def test_the_proxy_reaches_replicas_by_service_or_by_discovery(tmp_path: Path) -> None:
    path = ROOT / "examples/tiny-vllm/tier.yaml"
    docs = _docs(render_kubernetes(load_spec(path), path))
    router = next(
        d for d in docs if d["kind"] == "Deployment" and "router" in d["metadata"]["name"]
    )
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--worker-urls") + 1 :][:2] == [
        "http://tiny-r1:18101",
        "http://tiny-r2:18102",
    ]
    # One port on every replica: the router watches the engine pods (and may list them).
    same = path.read_text().replace(
        "args: {port: 18102, max-num-seqs: 2}", "args: {port: 18101, max-num-seqs: 2}"
    )
    (tmp_path / "tier.yaml").write_text(same)
    docs = _docs(render_kubernetes(load_spec(tmp_path / "tier.yaml"), tmp_path / "tier.yaml"))
    kinds = [d["kind"] for d in docs]
    assert {"ServiceAccount", "Role", "RoleBinding"} <= set(kinds)
    router = next(
        d for d in docs if d["kind"] == "Deployment" and "router" in d["metadata"]["name"]
    )
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--service-discovery" in args
    assert "--worker-urls" not in args
    report = check_manifests(
        parse_manifests(render_kubernetes(load_spec(tmp_path / "tier.yaml")), "x"), ["x"]
    )
    assert not [v for v in report.violations if v.rule == "TC007"], report.text()


def test_a_multi_node_engine_renders_a_leader_worker_set(tmp_path: Path) -> None:
    path = ROOT / "examples/glm53-long-context/tier.yaml"
    text = path.read_text().replace("    tp-size: 4\n", "    tp-size: 8\n    nnodes: 2\n")
    (tmp_path / "tier.yaml").write_text(text)
    spec = load_spec(tmp_path / "tier.yaml")
    docs = _docs(render_kubernetes(spec, tmp_path / "tier.yaml"))
    lws = [d for d in docs if d["kind"] == "LeaderWorkerSet"]
    assert len(lws) == 2
    group = lws[1]["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert leader["args"][leader["args"].index("--node-rank") + 1] == "0"
    assert worker["args"][worker["args"].index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert (
        leader["args"][leader["args"].index("--dist-init-addr") + 1]
        == "$(LWS_LEADER_ADDRESS):29511"
    )
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 4  # TP 8 over 2 nodes of 4
    assert "livenessProbe" not in worker  # workers serve no HTTP
    report = check_manifests(parse_manifests(render_kubernetes(spec), "x"), ["x"], spec=spec)
    assert report.ok, report.text()


def test_the_output_sits_beside_the_compose_file() -> None:
    assert kube_output_name("compose.yaml") == "compose.k8s.yaml"
    assert kube_output_name("prod/T.yaml") == "prod/T.k8s.yaml"
