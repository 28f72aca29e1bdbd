"""Kubernetes manifests read: files, directories and stdin, located (``manifests``), their
core and custom-resource schemas (``schemas``, ``crds/``), and the engine containers inside
every workload shape (``containers``); docs/kubernetes.md. The reader beside
:mod:`tierctl.compose`: the checks are :mod:`tierctl.contracts.kubernetes`, the import
:mod:`tierctl.adopt.kubernetes`, the runbook :mod:`tierctl.rollout.kubernetes`, and rendering
a spec into Kubernetes objects :mod:`tierctl.render.kubernetes`."""

from tierctl.kubernetes.manifests import Manifest, parse_manifests, read_manifests

__all__ = [
    "Manifest",
    "parse_manifests",
    "read_manifests",
]
