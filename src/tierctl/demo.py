"""The demo story: every lifecycle step on the bundled example, with simulated engines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from tierctl.render import output_path, render_compose
from tierctl.render.files import check_rendered
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.summary import summarise


def _examples_dir() -> Path:
    """The checkout's examples/ (editable installs), else the copy inside the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parents[1] / "examples"
    return checkout if checkout.is_dir() else here / "_examples"


EXAMPLES = _examples_dir()
DEFAULT_SPEC = EXAMPLES / "glm53-long-context" / "tier.yaml"

Stage = Callable[[Path, Console], bool]


def stage_render(spec_path: Path, console: Console) -> bool:
    """Declare and render: load the spec, render it, compare with the committed file."""
    spec = load_spec(spec_path)
    text = render_compose(spec, spec_path=spec_path)
    target = output_path(spec, spec_path)
    check = check_rendered(text, target)
    console.print(
        f"rendered {len(text.splitlines())} lines of compose for {len(spec.replicas)} replicas; "
        f"{target.name} is {'up to date' if check.fresh else 'STALE'}"
    )
    summary = summarise(resolve_tier(spec))
    for r in summary.replicas:
        console.print(f"  {r.name:3} {r.role:8} GPUs {r.gpus:5} port {r.port}  {r.variant}")
    for d in summary.differences:
        console.print(f"  differs: {d.setting:28} " + "  ".join(d.values))
    for note in summary.notes:
        console.print(f"  note: {note}")
    return check.fresh


STAGES: list[tuple[str, Stage, bool]] = [
    # (title, stage, needs servers)
    ("declare + render", stage_render, False),
]


def run_demo(spec_path: Path, *, console: Console, quick: bool = False) -> bool:
    """Run every stage in order; returns False at the first failing stage."""
    for title, stage, needs_servers in STAGES:
        if quick and needs_servers:
            continue
        console.print(Rule(title))
        if not stage(spec_path, console):
            console.print(f"[red]stage {title!r} failed[/red]")
            return False
    console.print(Rule("done"))
    return True
