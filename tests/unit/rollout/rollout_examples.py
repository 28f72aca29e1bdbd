"""Render variants of the bundled long-context example for rollout tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tierctl.render import render_compose
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "glm53-long-context" / "tier.yaml"
R1 = "model-sg-glm53-w4afp8-tp4-r1"
R2 = "model-sg-glm53-w4afp8-tp4-r2"
COLLECTOR = "otelcol-contrib"
PROXY = "proxy-glm53"
REGISTRAR = "model-proxy-registrar"


def render_variant(
    tmp: Path, name: str, mutate: Callable[[dict[str, Any]], None] = lambda d: None
) -> Path:
    """Write a mutated copy of the example spec next to its render; return the compose path."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    mutate(doc)
    spec_path = tmp / f"{name}.tier.yaml"
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp / f"{name}.compose.yaml"
    out.write_text(render_compose(load_spec(spec_path), spec_path=spec_path))
    return out


def r2_at_interval_1(doc: dict[str, Any]) -> None:
    """The state before the scheduler canary: both replicas at --prefill-decode-interval 1."""
    doc["replicas"]["r2"]["args"].pop("prefill-decode-interval")


def without_ingestion(doc: dict[str, Any]) -> None:
    """The state before the ingestion fix: no dynamic batch tokenizer overlay."""
    doc["engine"].pop("overlays")
