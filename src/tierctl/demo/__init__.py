"""``tierctl demo``: both field stories on one machine, on any spec with a canary.

Offline: render, validate (and catch a hand edit), simulate the canary change. Act 1, the
scheduler canary (:mod:`tierctl.demo.canary`): roll the spec's own canary change out with the
local driver over simulated engines, gated; a paired A/B; live traffic of the same shape while
a real Prometheus scrapes; the readout. Act 2, the ingestion incident
(:mod:`tierctl.demo.ingestion`): the real ``sglang-router`` in front of two engines during a
burst of 1.4 MB prompts, with the tokenizer on the event loop and then on its own thread.
Servers listen on free loopback ports and are always stopped; every load is bounded.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from tierctl.demo.context import DemoContext, Stage
from tierctl.demo.tier import analyse


def _examples_dir() -> Path:
    """The checkout's examples/ (editable installs), else the copy inside the wheel."""
    here = Path(__file__).resolve().parent.parent
    checkout = here.parents[1] / "examples"
    return checkout if checkout.is_dir() else here / "_examples"


EXAMPLES = _examples_dir()
DEFAULT_SPEC = EXAMPLES / "glm53-long-context" / "tier.yaml"


def _stages() -> list[tuple[str, Stage, str]]:
    from tierctl.demo.canary import stage_canary
    from tierctl.demo.ingestion import stage_ingestion
    from tierctl.demo.offline import stage_render, stage_simulate, stage_validate

    # (title, stage, what it needs: "" offline, "canary" a canary and servers, "servers")
    return [
        ("declare + render", stage_render, ""),
        ("validate", stage_validate, ""),
        ("simulate (offline what-if)", stage_simulate, ""),
        ("act 1: the scheduler canary (roll out, A/B, live, read out)", stage_canary, "canary"),
        (
            "act 2: the ingestion incident (real sglang-router, 1.4 MB prompts)",
            stage_ingestion,
            "servers",
        ),
    ]


def run_demo(
    spec_path: Path, *, console: Console, quick: bool = False, cost_model: Path | None = None
) -> bool:
    """Run every stage in order; returns False at the first failing stage.

    ``cost_model``: a cost model file for the what-if and every simulated engine.

    Raises:
        InputError: the spec or the cost model file cannot be read (located, with the rule
            and the fix).
    """
    if cost_model is not None:
        from tierctl.sim.costfile import read_cost_model

        read_cost_model(cost_model)  # refused before anything starts
    demo = analyse(spec_path)
    missing = [m for m in ("aiohttp", "numpy", "tokenizers") if importlib.util.find_spec(m) is None]
    # Kept after the run: it holds the journal, the A/B report and plots, and the logs.
    ctx = DemoContext(spec_path, demo, console, Path(tempfile.mkdtemp(prefix="tierctl-demo-")))
    ctx.cost_model = cost_model
    for title, stage, needs in _stages():
        if quick and needs:
            continue
        console.print(Rule(title))
        if needs and missing:
            console.print(
                f"[yellow]skipped: needs the 'all' extra (missing {', '.join(missing)})[/]"
            )
            continue
        if needs == "canary" and demo.problem is not None:
            console.print(f"[yellow]skipped: {demo.problem.message}[/]")
            console.print(f"  fix: {demo.problem.fix}")
            ctx.facts.setdefault("skipped", []).append(title)
            continue
        if not stage(ctx):
            # A located stop and the next command, never one red line alone (#37).
            console.print(Rule("verdict: not reached", style="red"))
            console.print(f"[red]stopped at stage {title!r}[/red] (its lines above say why)")
            console.print(
                f"files of the run (journal, A/B report, logs): {ctx.workdir}\n"
                f"next: tierctl demo --spec {spec_path} --debug (the same run, with "
                f"tracebacks), or tierctl demo --spec {spec_path} --quick (the acts without "
                "servers)"
            )
            return False
    console.print(Rule("done"))
    if quick:
        console.print("(--quick: the acts with servers were not run)")
        if demo.problem is not None:
            console.print(f"(act 1 would be skipped: {demo.problem.message})")
    return True


__all__ = ["DEFAULT_SPEC", "EXAMPLES", "DemoContext", "run_demo"]
