"""What the demo's stages share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tierctl.demo.tier import DemoTier


@dataclass
class DemoContext:
    """The spec and its reading, the console, a work directory, and what stages hand on.

    Attributes:
        spec_path: The tier spec the demo runs on.
        demo: The spec as the demo reads it (its canary and the canary's change).
        console: Where everything is printed.
        workdir: Rendered files, journals, reports, logs; kept after the run.
        rendered: The compose file the render stage wrote (in ``workdir``).
        facts: Figures later stages or tests read (verdicts, counts).
        cost_model: A cost model file (``tierctl sim fit``) for the what-if and the simulated
            engines; ``None`` uses the bundled preset.
    """

    spec_path: Path
    demo: DemoTier
    console: Console
    workdir: Path
    rendered: Path | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    cost_model: Path | None = None

    def sim_serve_options(self) -> list[str]:
        """``tierctl sim serve`` options every simulated engine of the demo gets."""
        return ["--cost-model", str(self.cost_model)] if self.cost_model is not None else []


Stage = Callable[[DemoContext], bool]
