"""Which side of a prefill/decode disaggregated pair an engine argv is, as its release says.

The engine profile's ``SimRules.disaggregation`` (a
:class:`~tierctl.engines.base.DisaggregationRule`) names the flag: SGLang's
``--disaggregation-mode prefill|decode|null`` with ``--disaggregation-transfer-backend``,
vLLM's ``--kv-transfer-config`` JSON with its ``kv_role`` (``kv_producer``, ``kv_consumer``,
``kv_both``) and ``kv_connector``. This module reads a parsed :class:`EngineConfig` through
that rule and refuses values the release does not take, naming the flag.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tierctl.errors import InputError, Location

if TYPE_CHECKING:
    from tierctl.sim.config import EngineConfig


def _raw(config: EngineConfig) -> tuple[str | None, str | None]:
    """(role value, backend value) as written, or None where unset."""
    rule = config.rules.disaggregation
    if rule is None:
        return None, None
    if rule.json_key:
        text = config.kv_transfer_config if config.engine == "vllm" else None
        if not text:
            return None, None
        doc: dict[str, Any] = json.loads(text)
        role = doc.get(rule.json_key)
        backend = doc.get(rule.backend_key) if rule.backend_key else None
        return (None if role is None else str(role)), (None if backend is None else str(backend))
    if config.engine != "sglang":
        return None, None
    return config.disaggregation_mode, config.disaggregation_transfer_backend


def role_of(config: EngineConfig) -> str | None:
    """``"prefill"``, ``"decode"``, ``"either"`` or None (colocated) for ``config``."""
    rule = config.rules.disaggregation
    role, _backend = _raw(config)
    if rule is None or role is None:
        return None
    if role in rule.prefill:
        return "prefill"
    if role in rule.decode:
        return "decode"
    if role in rule.either:
        return "either"
    return None


def transfer_backend(config: EngineConfig) -> str | None:
    """The KV transfer backend a disaggregated replica names (None when colocated)."""
    if role_of(config) is None:
        return None
    return _raw(config)[1]


def check_role(config: EngineConfig, source: str) -> None:
    """Refuse a disaggregation role or transfer backend the pinned release does not take.

    Raises:
        InputError: naming the flag (and the JSON key), the value and the values allowed.
    """
    rule = config.rules.disaggregation
    if rule is None:
        return
    role, backend = _raw(config)
    flag = f"--{rule.flag}"
    where = f"{flag} {rule.json_key}" if rule.json_key else flag
    release = f"{config.engine} {config.release}"
    if rule.json_key and config.kv_transfer_config and role is None:
        raise InputError(
            f"{flag} sets no {rule.json_key}",
            location=Location(file=source, path=flag),
            rule=f"{release}: a KV transfer config names its {rule.json_key}",
            value=config.kv_transfer_config,
            fix=f'add "{rule.json_key}": one of '
            + ", ".join(rule.prefill + rule.decode + rule.either),
        )
    allowed = rule.prefill + rule.decode + rule.colocated + rule.either
    if role is not None and role not in allowed:
        raise InputError(
            f"{where} {role!r} is not one of {release}'s",
            location=Location(file=source, path=flag),
            rule=f"{where} is one of " + ", ".join(allowed),
            value=role,
            fix=f"set {where} to one of " + ", ".join(allowed),
        )
    if rule.backend_flag and role is not None and backend not in rule.backends:
        raise InputError(
            f"--{rule.backend_flag} {backend!r} is not one of {release}'s",
            location=Location(file=source, path=f"--{rule.backend_flag}"),
            rule=f"--{rule.backend_flag} is one of " + ", ".join(rule.backends),
            value=backend,
            fix=f"set --{rule.backend_flag} to one of " + ", ".join(rule.backends),
        )
