"""The Kubernetes target: render with ``render.kubernetes``, validate and import with ``kube``,
plan with ``kube.plan`` (docs/kubernetes.md). The modules stay where they are this round; the
move to a ``kubernetes/`` package is in docs/architecture.md."""

from __future__ import annotations

import sys
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
            "validate": "tierctl.kube.validation",
            "import": "tierctl.kube.importing",
            "plan": "tierctl.kube.plan",
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
        from tierctl.kube.validation import validate_manifest_text
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
        from tierctl.kube.validation import KubeCheck, validate_manifests
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
        from tierctl.kube.importing import import_manifests

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


TARGET = KubernetesTarget()
