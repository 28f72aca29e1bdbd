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
    """

    spec_path: Path
    demo: DemoTier
    console: Console
    workdir: Path
    rendered: Path | None = None
    facts: dict[str, Any] = field(default_factory=dict)


Stage = Callable[[DemoContext], bool]
