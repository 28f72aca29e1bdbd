"""Roll out a compose change one service at a time: plan, execute with gates, runbook.

``plan_files`` diffs two compose files (paths or ``git:REF:PATH``) into ordered steps;
``run_rollout`` executes a plan through a driver (compose-manager, docker, local), journaled and
gated, rolling a failed replica back; ``render_runbook`` writes the plan as Markdown.
"""

from tierctl.rollout.drivers.compose_manager import ComposeManagerDriver
from tierctl.rollout.drivers.docker import DockerDriver
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.executor import RolloutOptions, RolloutResult, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.rollout.normalise import load_services
from tierctl.rollout.plan_schema import Plan, ServiceChange, Step
from tierctl.rollout.planner import PlanOptions, build_plan, plan_files
from tierctl.rollout.runbook import render_runbook

__all__ = [
    "ComposeManagerDriver",
    "DockerDriver",
    "GateSettings",
    "LocalDriver",
    "Plan",
    "PlanOptions",
    "RolloutOptions",
    "RolloutResult",
    "ServiceChange",
    "Step",
    "build_plan",
    "load_services",
    "load_sides",
    "plan_files",
    "render_runbook",
    "run_rollout",
]
