"""``tierctl import``: existing deployment files become a tier spec, one module per target.

:mod:`tierctl.adopt.compose` imports a compose file (its names are re-exported here, as
``tierctl.adopt`` was that module); :mod:`tierctl.adopt.kubernetes` imports Kubernetes
manifests and is not imported here, so importing a compose file loads no Kubernetes code.
"""

from tierctl.adopt.compose import (
    RENDER_ADDITIONS,
    Adoption,
    SecretReference,
    adopt,
    common_keys,
    overrides_over,
    without_render_additions,
)

__all__ = [
    "RENDER_ADDITIONS",
    "Adoption",
    "SecretReference",
    "adopt",
    "common_keys",
    "overrides_over",
    "without_render_additions",
]
