"""Several compose files merged like ``docker compose -f a -f b``: later files override.

Maps merge key by key; lists extend, except the keys whose list is one value (``command``,
``entrypoint``, a healthcheck ``test``, device ids and capabilities), which are replaced whole:
that is why per-replica flags must be rendered, not patched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tierctl.compose.forms import normalise_environment
from tierctl.compose.model import ComposeFile

# Compose keys whose list value replaces, rather than extends, a base file's list.
_REPLACED = {"command", "entrypoint", "test", "device_ids", "capabilities"}


def merge_compose(files: Sequence[ComposeFile]) -> ComposeFile:
    """Merge compose files like ``docker compose -f a -f b``: later files override earlier."""
    if len(files) == 1:
        return files[0]
    data: dict[str, Any] = {}
    for f in files:
        data = _merge(data, _normalised_for_merge(f.data), "")
    texts = tuple(t for f in files for t in f.texts)
    return ComposeFile.from_data(" + ".join(f.source for f in files), data, texts)


def _normalised_for_merge(data: dict[str, Any]) -> dict[str, Any]:
    # A list-form environment in one file and a map in the other merge by key, as in compose.
    services = {}
    for name, raw in (data.get("services") or {}).items():
        raw = dict(raw)
        for key in ("environment", "labels"):
            if key in raw:
                raw[key] = normalise_environment(raw[key])
        services[name] = raw
    return {**data, "services": services}


def _merge(base: Any, over: Any, key: str) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(out[k], v, str(k)) if k in out else v
        return out
    if isinstance(base, list) and isinstance(over, list) and key not in _REPLACED:
        return base + [item for item in over if item not in base]
    return over
