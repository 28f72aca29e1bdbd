"""The public API is exactly tierctl.__all__, sorted, and every name resolves."""

from __future__ import annotations

import inspect
import types

import tierctl


def test_all_is_sorted_and_resolves() -> None:
    assert tierctl.__all__ == sorted(tierctl.__all__)
    for name in tierctl.__all__:
        assert getattr(tierctl, name) is not None, name


def test_public_members_are_pinned() -> None:
    public = {name for name in dir(tierctl) if not name.startswith("_")}
    # Subpackages and modules show up as attributes once imported; they are not part of
    # __all__. Any module counts, so a new one (tierctl.realengine, ...) needs no entry here.
    public -= {
        name
        for name in public
        if isinstance(inspect.getattr_static(tierctl, name, None), types.ModuleType)
    }
    assert public == set(tierctl.__all__)


def test_base_import_does_not_pull_in_the_extras() -> None:
    """`import tierctl` must work on the base install: no numpy, aiohttp, scipy, tokenizers."""
    import subprocess
    import sys

    code = (
        "import sys, tierctl; heavy = {'numpy', 'aiohttp', 'scipy', 'tokenizers', 'matplotlib'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
