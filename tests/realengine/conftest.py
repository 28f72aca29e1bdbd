"""The real engine's session fixtures, for the tests under tests/realengine/ only.

Defined in :mod:`tests.realengine.fixtures`; registered here rather than in the root conftest,
so that a test elsewhere cannot start the real tier by asking for a fixture by accident.
"""

from __future__ import annotations

from tests.realengine.fixtures import (  # noqa: F401  (session fixtures of this folder)
    real_router,
    real_tier,
    sglang_python,
    tiny_model,
    vllm_pair,
    vllm_python,
)
