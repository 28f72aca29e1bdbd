"""Deployment contracts: compose files checked against the tier spec and the engine's flags.

``validate(spec, [load_compose(path)])`` runs the seven contracts (``RULES``) and returns a
:class:`Report`. ``load_compose`` and friends live in :mod:`tierctl.compose` (shared with the
rollout planner) and are exported here too, as the contracts' input.

The names are imported on first use (PEP 562 ``__getattr__``), so a submodule
(``contracts.crosscheck``, ``contracts.standalone``) costs its own imports only: ``validate``
of a compose file without a spec does not load the spec contracts or the spec's models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierctl.compose import ComposeFile, ComposeService, load_compose, merge_compose
    from tierctl.contracts.report import RULES, Report, Violation
    from tierctl.contracts.validation import validate, validate_paths

#: Each exported name -> the module that defines it.
_WHERE = {
    "ComposeFile": "tierctl.compose",
    "ComposeService": "tierctl.compose",
    "load_compose": "tierctl.compose",
    "merge_compose": "tierctl.compose",
    "RULES": "tierctl.contracts.report",
    "Report": "tierctl.contracts.report",
    "Violation": "tierctl.contracts.report",
    "validate": "tierctl.contracts.validation",
    "validate_paths": "tierctl.contracts.validation",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


__all__ = [
    "RULES",
    "ComposeFile",
    "ComposeService",
    "Report",
    "Violation",
    "load_compose",
    "merge_compose",
    "validate",
    "validate_paths",
]
