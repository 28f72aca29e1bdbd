"""Engine flag catalogs, built from the engines' own argument definitions without importing
them, and the catalogs shipped for pinned releases."""

from tierctl.catalog.build import build_catalog, parse_ref
from tierctl.catalog.store import diff_catalogs, flag_history, load_catalog, shipped
from tierctl.engine_catalog import Catalog, Flag

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
