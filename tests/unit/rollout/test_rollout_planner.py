"""Plans for the field reports' two changes on the bundled example, refusals and laws."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rollout_examples import (
    COLLECTOR,
    EXAMPLE,
    PROXY,
    R1,
    R2,
    REGISTRAR,
    r2_at_interval_1,
    render_variant,
    without_ingestion,
)

from tierctl.cli.main import option_labels
from tierctl.errors import ContractViolation, InputError
from tierctl.rollout.entrypoints import make_plan
from tierctl.rollout.planner import PlanOptions, plan_files


def _steps(plan: object) -> list[tuple[str, str]]:
    return [(s.action, s.service) for s in plan.steps]  # type: ignore[attr-defined]


def test_interval_canary_recreates_exactly_r2_then_the_collector(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old", r2_at_interval_1)
    new = render_variant(tmp_path, "new")
    plan = make_plan(str(old), str(new), spec=EXAMPLE)
    assert _steps(plan) == [("recreate", R2), ("recreate", COLLECTOR)]
    r2 = next(c for c in plan.services if c.service == R2)
    assert r2.details[0] == "command: --prefill-decode-interval: 1 -> 2"
    assert r2.old_variant is not None
    assert r2.old_variant.endswith("pdi1-h200-tp4")
    assert r2.new_variant is not None
    assert r2.new_variant.endswith("pdi2-h200-tp4")
    assert {R1, PROXY, REGISTRAR} <= set(plan.untouched)
    assert plan.steps[0].gates[:3] == ["health", "server-info", "metrics-variant"]


def test_ingestion_flag_rolls_r2_then_r1_then_the_collector(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old", without_ingestion)
    new = render_variant(tmp_path, "new")
    plan = make_plan(str(old), str(new), spec=EXAMPLE)
    assert _steps(plan) == [("recreate", R2), ("recreate", R1), ("recreate", COLLECTOR)]
    assert all(s.service not in (PROXY, REGISTRAR) for s in plan.steps)
    assert "+ --enable-dynamic-batch-tokenizer" in plan.steps[0].why or any(
        "enable-dynamic-batch-tokenizer" in d for c in plan.services for d in c.details
    )


def test_roles_are_inferred_from_labels_without_the_spec(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old", without_ingestion)
    new = render_variant(tmp_path, "new")
    assert _steps(plan_files(str(old), str(new))) == [
        ("recreate", R2),
        ("recreate", R1),
        ("recreate", COLLECTOR),
    ]


def _proxy_timeout(doc: dict) -> None:  # type: ignore[type-arg]
    cmd = doc["services"]["proxy-glm53"]["compose"]["command"]
    cmd[cmd.index("3s")] = "5s"


def test_a_plan_that_needs_the_proxy_refuses_unless_allowed(tmp_path: Path) -> None:
    old = render_variant(tmp_path, "old")
    new = render_variant(tmp_path, "new", _proxy_timeout)
    with pytest.raises(ContractViolation, match="protected services: proxy-glm53") as info:
        make_plan(str(old), str(new), spec=EXAMPLE)
    assert info.value.fix is not None
    assert "`allow` proxy-glm53" in info.value.fix  # the library names its parameter
    assert "--allow proxy-glm53" in info.value.format(option_labels(["plan"]))  # the CLI, its flag
    allowed = make_plan(str(old), str(new), spec=EXAMPLE, allow=frozenset({PROXY}))
    assert _steps(allowed) == [("recreate", PROXY)]
    assert allowed.allowed == [PROXY]


def test_protection_is_configurable_in_the_spec(tmp_path: Path) -> None:
    def allow_proxy(doc: dict) -> None:  # type: ignore[type-arg]
        doc["services"]["proxy-glm53"]["rollout"] = "allowed"

    old = render_variant(tmp_path, "old")
    new = render_variant(tmp_path, "new", _proxy_timeout)
    spec = tmp_path / "spec.tier.yaml"
    doc = yaml.safe_load(EXAMPLE.read_text())
    allow_proxy(doc)
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert _steps(make_plan(str(old), str(new), spec=spec)) == [("recreate", PROXY)]


def test_allow_of_an_unknown_service_is_an_input_error(tmp_path: Path) -> None:
    new = render_variant(tmp_path, "new")
    with pytest.raises(InputError, match="neither file"):
        make_plan(str(new), str(new), allow=frozenset({"nope"}))


def test_removed_engine_is_stopped_with_the_old_file_before_anything_else(tmp_path: Path) -> None:
    def three(doc: dict) -> None:  # type: ignore[type-arg]
        doc["replicas"]["r3"] = {"gpus": [8], "args": {"port": 30003}}

    old = render_variant(tmp_path, "old", lambda d: (three(d), without_ingestion(d)))
    new = render_variant(tmp_path, "new")
    r3 = "model-sg-glm53-w4afp8-tp4-r3"
    # One replica fewer changes the proxy's backend list: refused unless allowed.
    with pytest.raises(ContractViolation, match="proxy-glm53"):
        make_plan(str(old), str(new))
    plan = make_plan(str(old), str(new), allow=frozenset({PROXY}))
    assert plan.steps[0].action == "down"
    assert plan.steps[0].service == r3
    assert plan.steps[0].side == "old"
    assert [s.service for s in plan.steps[1:]] == [R2, R1, COLLECTOR, PROXY]
    added = make_plan(
        str(new), str(render_variant(tmp_path, "new3", three)), allow=frozenset({PROXY})
    )
    assert _steps(added) == [("up", r3), ("recreate", COLLECTOR), ("recreate", PROXY)]


def test_git_sources_are_read_at_their_ref(tmp_path: Path) -> None:
    repo = tmp_path / "deploy"
    repo.mkdir()
    old = render_variant(tmp_path, "old", r2_at_interval_1)
    new = render_variant(tmp_path, "new")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (repo / "tier.yaml").write_text(old.read_text())
    git("add", "tier.yaml")
    git("commit", "-qm", "old")
    git("tag", "v1")
    (repo / "tier.yaml").write_text(new.read_text())
    git("commit", "-qam", "new")
    plan = plan_files("git:v1:tier.yaml", "git:HEAD:tier.yaml", PlanOptions(), repo=repo)
    assert _steps(plan) == [("recreate", R2), ("recreate", COLLECTOR)]
    assert plan.source.git_ref == "v1"
    assert plan.source.path == "tier.yaml"
    with pytest.raises(InputError, match="git cannot show"):
        plan_files("git:v9:tier.yaml", "git:HEAD:tier.yaml", repo=repo)
    with pytest.raises(InputError, match="malformed git source"):
        plan_files("git:v1", "git:HEAD:tier.yaml", repo=repo)


_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
_FLAGS = st.dictionaries(
    _NAMES, st.one_of(st.just(True), st.integers(0, 99999), _NAMES), max_size=6
)


@st.composite
def compose_files(draw: st.DrawFn) -> str:
    services = {}
    for name in draw(st.lists(_NAMES, min_size=1, max_size=5, unique=True)):
        argv = ["python3", "-m", "sglang.launch_server"]
        for flag, value in draw(_FLAGS).items():
            argv += [f"--{flag}"] if value is True else [f"--{flag}", str(value)]
        services[name] = {
            "image": draw(_NAMES),
            "command": argv,
            "environment": draw(
                st.dictionaries(
                    _NAMES.map(str.upper).map(lambda s: s.replace("-", "_")), _NAMES, max_size=3
                )
            ),
            "labels": {
                "config_variant": draw(_NAMES),
                "tierctl.role": draw(
                    st.sampled_from(["canary", "control", "proxy", "collector", "other"])
                ),
            },
        }
    return yaml.safe_dump({"services": services})


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=compose_files())
def test_plan_between_equal_files_is_empty(tmp_path: Path, text: str) -> None:
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(text)
    # The same services written differently: flow style, keys reordered.
    b.write_text(yaml.safe_dump(yaml.safe_load(text), default_flow_style=True, sort_keys=False))
    plan = plan_files(str(a), str(b))
    assert plan.steps == []
    assert all(c.change == "unchanged" for c in plan.services)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(a=compose_files(), b=compose_files())
def test_any_plan_touches_each_service_once_and_never_a_protected_one(
    tmp_path: Path, a: str, b: str
) -> None:
    (tmp_path / "a.yaml").write_text(a)
    (tmp_path / "b.yaml").write_text(b)
    try:
        plan = plan_files(str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    except ContractViolation as exc:
        refusal = exc.message
    else:
        refusal = ""
    if refusal:
        assert refusal.startswith("the plan would change protected services: ")
        return
    touched = [s.service for s in plan.steps]
    assert len(touched) == len(set(touched))
    assert all(s.role != "proxy" for s in plan.steps)
    changed = {c.service for c in plan.services if c.change != "unchanged"}
    assert set(touched) <= changed | {c.service for c in plan.services if c.role == "collector"}
    # Scoped downs come first, and canaries before the other replicas.
    actions = [s.action for s in plan.steps]
    assert actions == sorted(actions, key=lambda x: x != "down")
    engine_roles = [
        c.replica_role
        for s in plan.steps
        for c in plan.services
        if c.service == s.service and s.role == "engine" and s.action == "recreate"
    ]
    assert engine_roles == sorted(engine_roles, key=lambda r: r != "canary")
