"""The Kubernetes target: render with ``render.kubernetes``, validate with
``contracts.kubernetes``, import with ``adopt.kubernetes`` (all reading manifests with the
``kubernetes`` package), its rollout as a runbook of kubectl commands with
``rollout.kubernetes`` (docs/kubernetes.md; it has no ``plan`` or ``rollout`` step: tierctl
does not run kubectl)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from tierctl.cli.targets import (
    ChangeRequest,
    Imported,
    ImportRequest,
    Planned,
    Rendering,
    RenderRequest,
    ValidateRequest,
)
from tierctl.contracts.report import Report
from tierctl.errors import InputError, Location


def read_stdin() -> str:
    """Standard input's text, bounded and decoded like every input file (UTF-8, a BOM
    dropped, a bad byte named by line and column).

    Its bytes, not the text stream: Python decodes standard input with ``surrogateescape``,
    so a byte that is no UTF-8 (``caf\xe9``) came through as a lone surrogate and PyYAML's
    encoder raised ``UnicodeEncodeError`` (a traceback, file fuzzer #38).
    """
    from tierctl.readers import Limits, decode

    limit = Limits.config().max_bytes
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        data = bytes(buffer.read(limit + 1))
    else:  # a text stream (an in-process runner's): its text as the bytes it stands for
        text = sys.stdin.read(limit + 1)
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode("utf-8", "surrogatepass")  # refused by decode, located
    if len(data) > limit:
        raise InputError(
            f"standard input holds more than {limit:,} bytes",
            rule="inputs are bounded (TIERCTL_MAX_INPUT_MB)",
            fix="validate the manifests from files, or raise TIERCTL_MAX_INPUT_MB",
        )
    return decode(data, "<stdin>")


def _stdin_of(paths: Sequence[Path]) -> str | None:
    return read_stdin() if any(str(p) == "-" for p in paths) else None


class KubernetesTarget:
    """Kubernetes manifests: files, directories, or ``-`` (a Helm/Kustomize output)."""

    name = "kubernetes"
    modules: Mapping[str, str] = MappingProxyType(
        {
            "render": "tierctl.render.kubernetes",
            "validate": "tierctl.contracts.kubernetes",
            "import": "tierctl.adopt.kubernetes",
            "runbook": "tierctl.rollout.kubernetes",
        }
    )

    def claims(self, paths: Sequence[Path]) -> bool:
        """``-``, a directory, or a file whose head has top-level ``apiVersion:`` and
        ``kind:`` keys (a compose file has neither)."""
        from tierctl.readers import read_bytes

        for path in paths:
            if str(path) == "-" or path.is_dir():
                return True
            if not path.is_file():
                continue
            head = read_bytes(path, what="file", head=65536).decode("utf-8", errors="replace")
            lines = head.splitlines()
            if any(x.startswith("apiVersion:") for x in lines) and any(
                x.startswith("kind:") for x in lines
            ):
                return True
        return False

    def render(self, request: RenderRequest) -> Rendering:
        """The objects, gated by the Kubernetes validation of the rendering."""
        from tierctl.contracts.kubernetes import validate_manifest_text
        from tierctl.render.files import spec_output
        from tierctl.render.kubernetes import kube_output_name, render_kubernetes

        spec, spec_path = request.spec, request.spec_path
        text = render_kubernetes(spec, spec_path=spec_path)
        name = kube_output_name(spec.output)
        path = request.output or spec_path.parent / name
        if request.output is None and request.writes:
            path = spec_output(name, spec_path, allow_outside=request.allow_outside)
        report = validate_manifest_text(text, str(path), spec=spec, spec_path=spec_path)
        return Rendering(text, path, report.violations, " --target kubernetes")

    def validate(self, request: ValidateRequest) -> Report:
        """The manifests: core and custom-resource schemas, then the engines' flags."""
        from tierctl.contracts.kubernetes import KubeCheck, validate_manifests
        from tierctl.render.kubernetes import KUBERNETES_VERSION

        if not request.paths:
            raise InputError(
                "nothing to validate",
                rule="usage",
                fix="pass manifest files, a directory, or - (standard input)",
            )
        settings = KubeCheck(
            version=request.kube_version or KUBERNETES_VERSION,
            engine=request.engine or request.catalog,
            strict=request.strict,
        )
        return validate_manifests(
            request.paths,
            spec_path=request.spec_path,
            stdin=_stdin_of(request.paths),
            settings=settings,
        )

    def import_files(self, request: ImportRequest) -> Imported:
        """A spec for the engine workloads of the manifests."""
        from tierctl.adopt.kubernetes import import_manifests

        result = import_manifests(
            request.paths,
            stdin=_stdin_of(request.paths),
            tier=request.tier,
            host=request.host,
            engine=request.engine,
            out=request.written_to,
        )
        return Imported(
            result.text,
            len(result.spec.replicas),
            len(result.spec.services),
            result.notes,
            result.differences,
            "the spec's Kubernetes rendering runs other flags",
            "the spec's Kubernetes rendering runs the same flags",
        )

    def runbook(self, request: ChangeRequest) -> Planned:
        """From OLD's rendering to NEW's (OLD and NEW: one tier spec each), replica by
        replica, canary first: dry run, diff, apply, wait, rollback."""
        from tierctl.render.kubernetes import kube_output_name
        from tierctl.rollout.kubernetes import kube_plan
        from tierctl.spec import load_spec

        old, new = _one_spec_each(request)
        kept = request.old_manifest
        if kept is not None and not Path(kept).is_file():
            raise InputError(
                f"--old-manifest {kept}: no such file (a rollback would apply nothing)",
                location=Location(file=kept),
                rule="the rollback applies a rendering that exists",
                fix="leave --old-manifest out (the rollback renders OLD), or save OLD's "
                "rendering there first: tierctl render --target kubernetes OLD > FILE",
            )
        old_spec, new_spec = load_spec(old), load_spec(new)
        manifest = request.manifest or str(new.parent / kube_output_name(new_spec.output))
        plan = kube_plan(old_spec, new_spec, manifest, kept, str(old))
        # Printed with a newline after it, as the compose runbook is; -o writes the newline.
        return Planned(plan.markdown(manifest).removesuffix("\n"), _is_kube_runbook)


def _is_kube_runbook(text: str) -> bool:
    return text.startswith("# Kubernetes rollout of ")


def _one_spec_each(request: ChangeRequest) -> tuple[Path, Path]:
    """OLD and NEW as one tier spec file each; the compose plan's options refused."""
    given = [
        name
        for name, value in (
            ("--allow", request.allow),
            ("--protect", request.protect),
            ("--repo", request.repo),
            ("--spec", request.spec),
        )
        if value
    ]
    if given:
        raise InputError(
            f"{', '.join(given)}: the Kubernetes runbook takes none of them",
            rule="OLD and NEW are tier specs; each replica is its own workload",
            fix="leave them out (the specs hold the roles)",
        )
    sides = (request.old, request.new)
    if any(len(side) != 1 or side[0].startswith("git:") for side in sides):
        raise InputError(
            "the Kubernetes runbook takes one tier spec file a side",
            rule="--from OLD_SPEC --to NEW_SPEC (no override files, no git:REF:PATH)",
            value=" ".join(" + ".join(side) for side in sides),
            fix="pass one --from and one --to, each a tier.yaml",
        )
    return Path(request.old[0]), Path(request.new[0])


TARGET = KubernetesTarget()
