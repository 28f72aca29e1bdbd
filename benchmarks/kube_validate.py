"""Kubernetes render and validate timings: the bundled examples rendered and validated
against their spec, the manifest corpus validated whole, and a Helm-sized output (the corpus
repeated 20 times, as one multi-document stream) read from text.

Run: PYTHONPATH=src python benchmarks/kube_validate.py
"""

from __future__ import annotations

import time
from pathlib import Path

from tierctl.contracts.kubernetes import check_manifests
from tierctl.kubernetes import parse_manifests, read_manifests
from tierctl.render.kubernetes import render_kubernetes
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests/fixtures/kube_corpus"


def _timed(label: str, fn: object, repeat: int = 3) -> None:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    print(f"{label:58s} {best * 1000:9.1f} ms   {out}")


def main() -> None:
    # The first call loads the core schemas (1.4 MB of definitions) and builds validators.
    t0 = time.perf_counter()
    check_manifests(read_manifests([CORPUS / "10-plain-deployment-vllm.yaml"]), ["x"])
    print(
        f"{'first validation (schemas loaded, validators built)':58s} "
        f"{(time.perf_counter() - t0) * 1000:9.1f} ms"
    )
    for spec_path in sorted((ROOT / "examples").glob("*/tier.yaml")):
        spec = load_spec(spec_path)
        name = spec_path.parent.name

        def render(spec: object = spec) -> str:
            text = render_kubernetes(spec)  # type: ignore[arg-type]
            return f"{len(text.splitlines())} lines"

        _timed(f"render {name}", render)
        text = render_kubernetes(spec)

        def validate(text: str = text, spec: object = spec) -> str:
            report = check_manifests(parse_manifests(text, "r"), ["r"], spec=spec)  # type: ignore[arg-type]
            return f"{report.services_checked} objects, ok={report.ok}"

        _timed(f"validate {name} against its spec", validate)

    def corpus() -> str:
        report = check_manifests(read_manifests([CORPUS]), [str(CORPUS)])
        return f"{report.services_checked} objects, {len(report.violations)} violations"

    _timed("validate the corpus (14 files)", corpus)
    big = "\n---\n".join(p.read_text() for p in sorted(CORPUS.glob("*.yaml")) for _ in range(20))

    def helm_sized() -> str:
        report = check_manifests(parse_manifests(big, "<stdin>"), ["<stdin>"])
        return f"{report.services_checked} objects, {len(big) // 1024} KiB"

    _timed("validate a 20x corpus stream", helm_sized, repeat=1)


if __name__ == "__main__":
    main()
