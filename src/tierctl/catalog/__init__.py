"""Engine flag catalogs, built from the engines' own argument definitions without importing
them, and the catalogs shipped for pinned releases.

``build_catalog`` (and with it the flag extractors) is imported on first use, so reading a
shipped catalog (``validate``, ``render``) does not pay for building one.
"""

from typing import TYPE_CHECKING, Any

from tierctl.catalog.refs import parse_ref
from tierctl.catalog.store import diff_catalogs, flag_history, load_catalog, shipped
from tierctl.engine_catalog import Catalog, Flag

if TYPE_CHECKING:
    from tierctl.catalog.build import build_catalog


def __getattr__(name: str) -> Any:
    if name == "build_catalog":
        from tierctl.catalog.build import build_catalog

        return build_catalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Catalog",
    "Flag",
    "build_catalog",
    "diff_catalogs",
    "flag_history",
    "load_catalog",
    "parse_ref",
    "shipped",
]
