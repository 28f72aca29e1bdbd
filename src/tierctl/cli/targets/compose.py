"""The docker compose target: render with ``render.compose``, validate with ``contracts``,
import with ``adopt``, plan with ``rollout``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from tierctl.cli.targets import (
    Imported,
    ImportRequest,
    Rendering,
    RenderRequest,
    ValidateRequest,
)
from tierctl.contracts.report import Report
from tierctl.errors import InputError


class ComposeTarget:
    """docker compose files: the default target (claims what no other does)."""

    name = "compose"
    modules: Mapping[str, str] = MappingProxyType(
        {
            "render": "tierctl.render.compose",
            "validate": "tierctl.contracts.validation",
            "import": "tierctl.adopt",
            "plan": "tierctl.rollout.planner",
        }
    )

    def claims(self, paths: Sequence[Path]) -> bool:
        """Compose files carry no marker another target's lack: the fallback claims nothing."""
        return False

    def render(self, request: RenderRequest) -> Rendering:
        """The compose file, gated by the spec gate (the contracts validate runs)."""
        from tierctl.contracts.spec_gate import check_rendering
        from tierctl.render import output_path, render_compose
        from tierctl.render.files import spec_output

        spec, spec_path = request.spec, request.spec_path
        text = render_compose(spec, spec_path=spec_path)
        path = request.output or output_path(spec, spec_path)
        if request.output is None and request.writes:
            # The spec's own output stays in its folder unless asked (paths.resolve_inside).
            path = spec_output(spec.output, spec_path, allow_outside=request.allow_outside)
        gate = check_rendering(spec, text, spec_path, profiles=request.profiles)
        return Rendering(text, path, gate.violations)

    def validate(self, request: ValidateRequest) -> Report:
        """The files against the spec's contracts, or on their own without one."""
        if request.spec_path is not None:
            from tierctl.contracts.validation import validate_paths

            return validate_paths(
                request.spec_path,
                request.paths,
                catalog=request.catalog,
                profiles=request.profiles,
                compose_check=request.compose_check,
            )
        if not request.paths:
            raise InputError(
                "nothing to validate",
                rule="usage",
                fix="pass --spec tier.yaml, or the compose files to check on their own",
            )
        from tierctl.contracts.standalone import validate_files

        return validate_files(
            request.paths,
            engine=request.engine or request.catalog,
            strict=request.strict,
            profiles=request.profiles,
            compose_check=request.compose_check,
        )

    def import_files(self, request: ImportRequest) -> Imported:
        """A spec for compose files (merged like ``docker compose -f a -f b``)."""
        from tierctl.adopt import adopt

        result = adopt(
            request.paths,
            out=request.out,
            tier=request.tier,
            host=request.host,
            engine=request.engine,
            engine_services=request.engine_services,
            profiles=request.profiles,
        )
        return Imported(
            result.text,
            len(result.spec.replicas),
            len(result.spec.services),
            result.notes,
            result.differences,
        )


TARGET = ComposeTarget()
