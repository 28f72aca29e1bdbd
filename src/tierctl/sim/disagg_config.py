"""Which side of a prefill/decode disaggregated pair an engine argv is, as its release says.

The engine profile's ``SimRules.disaggregation`` (a
:class:`~tierctl.engines.base.DisaggregationRule`) names the flag: SGLang's
``--disaggregation-mode prefill|decode|null`` with ``--disaggregation-transfer-backend``,
vLLM's ``--kv-transfer-config`` JSON with its ``kv_role`` (``kv_producer``, ``kv_consumer``,
``kv_both``) and ``kv_connector``. This module reads a parsed :class:`EngineConfig` through
that rule and refuses values the release does not take, naming the flag.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

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
    if rule.json_key and config.kv_transfer_config and role is None and backend is not None:
        # vLLM's KVTransferConfig: "Please specify kv_role when kv_connector is set".
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


@dataclass(frozen=True)
class TransferSettings:
    """The hand-off between the pools: how many prompts' KV one prefill replica sends at once
    (``slots``; the engine's transfer queues, stated in its profile unless overridden) and
    an override of the cost model's link (``gb_per_s``; None: the cost model's)."""

    slots: int | None = None
    gb_per_s: float | None = None


@dataclass(frozen=True)
class DisaggTier:
    """A prefill pool and a decode pool of one engine, simulated as one arm.

    Attributes:
        prefill: the prefill replicas' configurations (one per replica).
        decode: the decode replicas' configurations.
        names: the replicas' names as given (spec replica names, or ``argv[i]``).
        transfer: the hand-off settings.
    """

    prefill: tuple[EngineConfig, ...]
    decode: tuple[EngineConfig, ...]
    names: tuple[str, ...] = ()
    transfer: TransferSettings = TransferSettings()

    @property
    def engine(self) -> str:
        """The engine both pools run."""
        return self.decode[0].engine

    @property
    def slots(self) -> int:
        """Concurrent transfers per prefill replica."""
        rule = self.decode[0].rules.disaggregation
        default = rule.default_transfer_slots if rule is not None else 4
        return self.transfer.slots or default

    def as_config(self) -> EngineConfig:
        """One configuration that stands for the arm where one is read whole (the flag
        comparison between arms, the argv shown): the decode pool's first, with every
        pool's flags (a flag's decode value wins) and the argvs joined."""
        first = self.decode[0]
        flags: dict[str, tuple[str, ...]] = {}
        for cfg in (*self.prefill, *self.decode):
            flags.update(cfg.flag_map())
        argv: list[str] = []
        for name, cfg in zip(self.names or (), (*self.prefill, *self.decode), strict=False):
            argv += [f"[{name}]", *cfg.argv]
        return dataclasses.replace(first, flags=tuple(flags.items()), argv=tuple(argv))


#: A simulated arm: one replica, or a disaggregated pair of pools.
ArmConfig = Union["EngineConfig", DisaggTier]


def arm_flags(arm: ArmConfig) -> EngineConfig:
    """The one configuration an arm's flags are compared by (a pool pair's merged one)."""
    return arm.as_config() if isinstance(arm, DisaggTier) else arm


def _refuse(msg: str, where: str, path: str, value: object, rule: str, fix: str) -> InputError:
    return InputError(msg, location=Location(file=where, path=path), rule=rule, value=value,
                      fix=fix)  # fmt: skip


def disaggregated_tier(
    members: list[tuple[str, str, EngineConfig, str | None]],
    transfer: TransferSettings | None = None,
) -> ArmConfig:
    """The arm ``members`` make: ``(name, where, config, role given)`` each; one colocated
    replica stays itself, several form a :class:`DisaggTier`.

    A member's role is its flags' (``role_of``), or the one given (``prefill:``/``decode:``
    before its name or argv) when its flags say ``either`` (vLLM ``kv_both``).

    Raises:
        InputError: naming the member and its flag: a lone prefill or decode replica, a
            colocated replica among disaggregated ones, a role not given where the flags
            leave it open (or contradicting them), two engines, or two transfer backends.
    """
    roles: list[str | None] = []
    for name, where, cfg, given in members:
        rule = cfg.rules.disaggregation
        flag = f"--{rule.flag}" if rule is not None else "the argv"
        role = cfg.disaggregation_role
        if role == "either":
            if given is None:
                raise _refuse(
                    f"{name} takes either side ({flag} says both): say which",
                    where, flag, role,
                    "a replica whose KV transfer role is both is given a side",
                    f"write prefill:{name} or decode:{name}",
                )  # fmt: skip
            role = given
        elif given is not None and role is not None and given != role:
            raise _refuse(
                f"{name} is given as {given} but its {flag} makes it {role}",
                where, flag, role, "a given side agrees with the replica's flags",
                f"drop the {given}: prefix or change {flag}",
            )  # fmt: skip
        elif given is not None and role is None:
            raise _refuse(
                f"{name} is given as {given} but is not disaggregated ({flag} unset)",
                where, flag, None, "a prefill or decode replica carries its engine's flag",
                f"set {flag} on {name} (see docs/sim.md, Prefill/decode disaggregation)",
            )  # fmt: skip
        roles.append(role)
    if len(members) == 1 and roles[0] is None:
        return members[0][2]
    engines = {m[2].engine for m in members}
    if len(engines) > 1:
        name, where, _cfg, _g = members[-1]
        raise _refuse(
            "the pools run different engines: " + ", ".join(sorted(engines)),
            where, "engine", sorted(engines), "both pools of a disaggregated arm run one engine",
            "give replicas of one engine",
        )  # fmt: skip
    for (name, where, cfg, _g), role in zip(members, roles, strict=True):
        if role is None:
            rule = cfg.rules.disaggregation
            flag = f"--{rule.flag}" if rule is not None else "argv"
            raise _refuse(
                f"{name} is colocated ({flag} unset) but listed with disaggregated replicas",
                where, flag, None, "every replica of a disaggregated arm is prefill or decode",
                f"set {flag} on {name}, or simulate it on its own",
            )  # fmt: skip
    prefill = tuple(m[2] for m, r in zip(members, roles, strict=True) if r == "prefill")
    decode = tuple(m[2] for m, r in zip(members, roles, strict=True) if r == "decode")
    if not prefill or not decode:
        have, need = ("prefill", "decode") if prefill else ("decode", "prefill")
        name, where, cfg, _g = members[0]
        rule = cfg.rules.disaggregation
        flag = f"--{rule.flag}" if rule is not None else "argv"
        raise _refuse(
            f"a {have} pool with no {need} pool: {', '.join(m[0] for m in members)}",
            where, flag, have,
            "a disaggregated arm has at least one prefill and one decode replica",
            f"add a {need} replica (comma-separated: p1,d1; or repeat the argv option)",
        )  # fmt: skip
    backends = {b for m in members if (b := transfer_backend(m[2])) is not None}
    if len(backends) > 1:
        name, where, cfg, _g = members[-1]
        raise _refuse(
            "the pools name different KV transfer backends: " + ", ".join(sorted(backends)),
            where, "transfer backend", sorted(backends),
            "both sides of a KV transfer use one backend",
            "give every replica the same transfer backend",
        )  # fmt: skip
    names = tuple(m[0] for m, r in zip(members, roles, strict=True) if r == "prefill") + tuple(
        m[0] for m, r in zip(members, roles, strict=True) if r == "decode"
    )
    return DisaggTier(prefill, decode, names, transfer or TransferSettings())
