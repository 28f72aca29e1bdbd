"""``tierctl kube plan``: a canary flag change moves exactly the canary's workload, first,
with a server-side dry run, a diff, a label-scoped apply, a wait as long as the model load
and a rollback; the control, the proxy and the monitor are untouched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tierctl.rollout.kubernetes import kube_plan
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
GLM = ROOT / "examples/glm53-long-context/tier.yaml"


def _before(tmp_path: Path) -> Path:
    old = tmp_path / "old.yaml"
    old.write_text(
        GLM.read_text().replace("prefill-decode-interval: 2}", "prefill-decode-interval: 1}")
    )
    return old


def test_only_the_canary_moves_and_first(tmp_path: Path) -> None:
    plan = kube_plan(load_spec(_before(tmp_path)), load_spec(GLM), "new.yaml", "old.yaml")
    assert plan.changed == (("Deployment", "model-sg-glm53-w4afp8-tp4-r2"),)
    assert not plan.added
    assert not plan.removed
    assert ("Deployment", "model-sg-glm53-w4afp8-tp4-r1") in plan.untouched
    [step] = plan.steps
    assert step.title == "replica r2 (canary)"
    assert step.commands[0] == "kubectl apply --dry-run=server -f new.yaml -l tierctl/replica=r2"
    assert "kubectl apply -f new.yaml -l tierctl/replica=r2" in step.commands
    # The spec's 900 s load budget, and 5 minutes beside it.
    assert (
        step.commands[-1]
        == "kubectl rollout status deployment/model-sg-glm53-w4afp8-tp4-r2 --timeout=1200s"
    )
    assert step.rollback[0] == "kubectl rollout undo deployment/model-sg-glm53-w4afp8-tp4-r2"


def test_a_change_on_every_replica_goes_canary_first_control_last(tmp_path: Path) -> None:
    new = tmp_path / "new.yaml"
    new.write_text(
        GLM.read_text().replace("    max-running-requests: 16\n", "    max-running-requests: 24\n")
    )
    plan = kube_plan(load_spec(GLM), load_spec(new))
    assert [s.title for s in plan.steps] == ["replica r2 (canary)", "replica r1 (control)"]


def test_nothing_to_do_says_so(tmp_path: Path) -> None:
    plan = kube_plan(load_spec(GLM), load_spec(GLM))
    assert plan.steps == ()
    assert "Nothing changes" in plan.markdown("x.yaml")


def test_the_cli_prints_the_runbook(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    result = run_cli("kube", "plan", str(_before(tmp_path)), str(GLM))
    assert result.code == 0, result.err
    assert result.out.startswith("# Kubernetes rollout of ")
    assert "## 1. replica r2 (canary)" in result.out
    assert "tierctl/replica=r1" not in result.out  # the control is not touched


def test_the_rollback_applies_a_rendering_that_exists(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # #41: the rollback applied old.k8s.yaml, which nothing writes. Without a kept copy it
    # renders OLD on the spot; a named copy that is not there is refused.
    old = _before(tmp_path)
    plan = kube_plan(load_spec(old), load_spec(GLM), "new.yaml", old_spec=str(old))
    [step] = plan.steps
    assert step.rollback[-1] == (
        f"tierctl render --target kubernetes {old} | kubectl apply -f - -l tierctl/replica=r2"
    )
    assert "old.k8s.yaml" not in plan.markdown("new.yaml")
    kept = tmp_path / "kept.k8s.yaml"
    kept.write_text("# OLD's rendering\n")
    [step] = kube_plan(load_spec(old), load_spec(GLM), "new.yaml", str(kept)).steps
    assert step.rollback[-1] == f"kubectl apply -f {kept} -l tierctl/replica=r2"
    missing = run_cli(
        "kube", "plan", str(old), str(GLM), "--old-manifest", str(tmp_path / "nope.yaml")
    )
    assert missing.code == 2
    assert "no such file" in missing.err
    result = run_cli("kube", "plan", str(old), str(GLM))
    assert f"tierctl render --target kubernetes {old} | kubectl apply -f -" in result.out
