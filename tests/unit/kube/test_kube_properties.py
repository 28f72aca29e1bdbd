"""Laws of the Kubernetes rendering: for any per-replica override, the rendering validates
clean against its own spec, and the override lands on that replica's workload alone; any
other replica's value put on it is caught as drift naming that replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierctl.contracts.kubernetes import check_manifests
from tierctl.kubernetes import parse_manifests
from tierctl.render.kubernetes import render_kubernetes
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec_text

GLM = Path(__file__).resolve().parents[3] / "examples/glm53-long-context/tier.yaml"
BASE = yaml.safe_load(GLM.read_text())


def _args(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {
        d["metadata"]["labels"]["tierctl/replica"]: d["spec"]["template"]["spec"]["containers"][0][
            "args"
        ]
        for d in docs
        if d["kind"] == "Deployment" and "tierctl/replica" in d["metadata"]["labels"]
    }


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replica=st.sampled_from(["r1", "r2"]),
    running=st.integers(min_value=1, max_value=4096),
    interval=st.integers(min_value=0, max_value=8),
)
def test_an_override_lands_on_its_replica_alone_and_validates(
    replica: str, running: int, interval: int
) -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["replicas"][replica]["args"]["max-running-requests"] = running
    doc["replicas"]["r1"]["args"]["prefill-decode-interval"] = interval
    spec = load_spec_text(yaml.safe_dump(doc, sort_keys=False), str(GLM))
    text = render_kubernetes(spec)
    report = check_manifests(parse_manifests(text, "k.yaml"), ["k.yaml"], spec=spec)
    assert report.ok, report.text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    args = _args(docs)
    at = {r: a[a.index("--max-running-requests") + 1] for r, a in args.items()}
    other = "r2" if replica == "r1" else "r1"
    assert at[replica] == str(running)
    assert at[other] == "16"  # the base value, untouched
    # The other replica's value put on this one is drift that names the other replica.
    if running != 16:
        a = args[replica]
        a[a.index("--max-running-requests") + 1] = "16"
        broken = "---\n".join(dump_yaml(d) for d in docs)
        report = check_manifests(parse_manifests(broken, "k.yaml"), ["k.yaml"], spec=spec)
        [v] = report.violations
        assert v.rule == "TC001"
        assert f"replica {replica}: --max-running-requests" in v.message
        assert f"{other})" in v.message
