"""Kubernetes: manifests read and located, their schemas, the engine containers inside every
workload shape, and ``validate`` of them (docs/kubernetes.md). Rendering a spec into
Kubernetes objects is :mod:`tierctl.render.kubernetes`."""

from tierctl.kube.manifests import Manifest, parse_manifests, read_manifests
from tierctl.kube.validation import KubeCheck, check_manifests, validate_manifests

__all__ = [
    "KubeCheck",
    "Manifest",
    "check_manifests",
    "parse_manifests",
    "read_manifests",
    "validate_manifests",
]
