"""Reading docker compose files the way ``docker compose config`` sees them.

One reader for every part of tierctl: ``validate`` reads files with every ``${...}`` kept as
written, ``plan``/``rollout`` with defaults applied and unset secrets kept as written. See
:func:`load_compose` and :class:`Interpolation`.
"""

from tierctl.compose.compose_file import ComposeFile, ComposeService
from tierctl.compose.interpolation import Interpolation
from tierctl.compose.loader import load_compose, parse_compose
from tierctl.compose.merge import merge_compose

__all__ = [
    "ComposeFile",
    "ComposeService",
    "Interpolation",
    "load_compose",
    "merge_compose",
    "parse_compose",
]
