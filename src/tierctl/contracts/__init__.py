"""Deployment contracts: compose files checked against the tier spec and the engine's flags.

``validate(spec, [load_compose(path)])`` runs the seven contracts (``RULES``) and returns a
:class:`Report`. ``load_compose`` and friends live in :mod:`tierctl.compose` (shared with the
rollout planner) and are exported here too, as the contracts' input.
"""

from tierctl.compose import ComposeFile, ComposeService, load_compose, merge_compose
from tierctl.contracts.report import RULES, Report, Violation
from tierctl.contracts.validation import validate, validate_paths

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
