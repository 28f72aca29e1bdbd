"""Rendering a tier spec into a deterministic docker compose file."""

from tierctl.render.compose import compose_document, output_path, render_compose, spec_digest
from tierctl.render.yaml_emit import dump_yaml

__all__ = ["compose_document", "dump_yaml", "output_path", "render_compose", "spec_digest"]
