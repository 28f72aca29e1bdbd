"""What the demo needs to know about a spec: its canary, its control, and the canary's change.

The demo works on any tier spec with a canary: the scheduler act rolls out *the spec's own*
canary change (the flags the canary runs differently from the control, placement aside), from
an OLD tier where the canary still runs the control's flags. A spec without a canary, or whose
canary runs the control's flags, gets a message that says which and how to add one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.errors import InputError, Location
from tierctl.readers import read_text
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.effective import flag_tokens
from tierctl.spec.loader import parse_yaml

#: Flags that differ between replicas by design (where each listens and rendezvous), never
#: part of a canary change.
PLACEMENT_FLAGS = frozenset(
    {"port", "host", "dist-init-addr", "nccl-port", "base-gpu-id", "device", "gpu-id"}
)

#: The live acts' sizing for a small CPU-only machine: chunked prefill of at most this many
#: tokens, so a 60K-token prompt is 15 chunks (the field report's 720K prompts in 16K chunks
#: are ~44) and the decodes between them are visible.
DEMO_CHUNK_TOKENS = 4096


@dataclass(frozen=True)
class CanaryChange:
    """One flag the canary runs differently: its value on the control and on the canary.

    ``None`` means the replica does not pass the flag.
    """

    flag: str
    control: str | None
    canary: str | None


@dataclass(frozen=True)
class DemoTier:
    """A spec as the demo reads it.

    Attributes:
        spec_path: The spec file.
        doc: The spec as plain data (to derive OLD and the sized copies from).
        engine: The engine kind (``sglang`` or ``vllm``).
        control: The control replica's name, or ``None`` without roles.
        canary: The canary replica's name, or ``None`` without roles.
        change: What the canary runs differently (empty without a canary).
        problem: Why the live acts cannot run on this spec (``None`` when they can).
    """

    spec_path: Path
    doc: dict[str, Any]
    engine: str
    control: str | None
    canary: str | None
    change: tuple[CanaryChange, ...]
    problem: InputError | None

    def require_canary(self) -> tuple[str, str]:
        """The (control, canary) names, or the reason there are none.

        Raises:
            InputError: the spec has no usable canary (the message says why and how to fix).
        """
        if self.problem is not None:
            raise self.problem
        assert self.control is not None
        assert self.canary is not None
        return self.control, self.canary


def _shown(name: str, value: Any) -> str | None:
    if name not in value:
        return None
    tokens = flag_tokens(name, value[name])
    return None if not tokens else " ".join(tokens[1:]) or "on"


def analyse(spec_path: Path) -> DemoTier:
    """Read a spec and find its canary change.

    Raises:
        InputError: the spec cannot be read or breaks a rule (located, as ``tierctl render``).
    """
    spec = load_spec(spec_path)
    tier = resolve_tier(spec)
    data, _ = parse_yaml(read_text(spec_path, what="spec"), str(spec_path))
    doc: dict[str, Any] = copy.deepcopy(data)
    roles = {r.name: r.role for r in tier.replicas.values()}
    controls = [n for n, role in roles.items() if role == "control"]
    canaries = [n for n, role in roles.items() if role == "canary"]
    where = Location(file=str(spec_path), path="replicas")
    if len(canaries) != 1 or len(controls) != 1:
        seen = ", ".join(f"{n}: {r or 'no role'}" for n, r in roles.items())
        no_roles = InputError(
            f"{spec_path.name} has {len(canaries)} canary and {len(controls)} control "
            f"replica(s) ({seen}): the demo's live acts roll out a canary against a control",
            location=where,
            rule="one replica with `role: canary` and one with `role: control`",
            fix="set `role: control` on one replica and `role: canary` on another, and give the "
            "canary's `args` the flag to try (e.g. `prefill-decode-interval: 2`)",
        )
        return DemoTier(spec_path, doc, spec.engine.kind, None, None, (), no_roles)
    control, canary = controls[0], canaries[0]
    c_flags = tier.replicas[control].flags
    k_flags = tier.replicas[canary].flags
    change = tuple(
        CanaryChange(name, _shown(name, c_flags), _shown(name, k_flags))
        for name in dict.fromkeys([*c_flags, *k_flags])
        if name not in PLACEMENT_FLAGS and _shown(name, c_flags) != _shown(name, k_flags)
    )
    problem: InputError | None = None
    if not change:
        problem = InputError(
            f"canary {canary} runs the same flags as control {control} (placement aside): "
            "there is no canary change to roll out",
            location=Location(file=str(spec_path), path=f"replicas.{canary}.args"),
            rule="the canary differs from the control in at least one flag",
            fix=f"give replicas.{canary}.args the flag to try (e.g. `prefill-decode-interval: 2`)",
        )
    return DemoTier(spec_path, doc, spec.engine.kind, control, canary, change, problem)


def old_doc(demo: DemoTier) -> dict[str, Any]:
    """The tier before the canary change: the canary runs the control's value of each flag."""
    control, canary = demo.require_canary()
    doc = copy.deepcopy(demo.doc)
    args = doc["replicas"][canary].setdefault("args", {}) or {}
    doc["replicas"][canary]["args"] = args
    control_flags = resolve_tier(load_spec(demo.spec_path)).replicas[control].flags
    for c in demo.change:
        if c.flag in control_flags:
            args[c.flag] = copy.deepcopy(control_flags[c.flag])
            continue
        args.pop(c.flag, None)  # the canary's own addition
        if c.flag in _effective_flags(doc, canary):
            args[c.flag] = None  # null removes a flag the base or an overlay adds
    return doc


def _effective_flags(doc: dict[str, Any], replica: str) -> dict[str, Any]:
    from tierctl.render.yaml_emit import dump_yaml
    from tierctl.spec import load_spec_text

    return resolve_tier(load_spec_text(dump_yaml(doc), "old.yaml")).replicas[replica].flags


def sized(
    doc: dict[str, Any], demo: DemoTier, ports: dict[str, int]
) -> tuple[dict[str, Any], list[str]]:
    """A copy for this machine: loopback ports, small prefill chunks; and what was changed.

    Every change is returned as a sentence, so the demo says what it altered (variants that
    carry the chunk size change with it).
    """
    out = copy.deepcopy(doc)
    notes: list[str] = []
    args = out["engine"].setdefault("args", {})
    args["host"] = "127.0.0.1"
    for name, port in ports.items():
        rep = out["replicas"][name]
        rep["args"] = rep.get("args") or {}
        rep["args"]["port"] = port
    notes.append("engines listen on 127.0.0.1 at free ports")
    changed = {c.flag for c in demo.change}
    if demo.engine == "sglang" and "chunked-prefill-size" not in changed:
        size = args.get("chunked-prefill-size")
        if not isinstance(size, int) or size > DEMO_CHUNK_TOKENS:
            args["chunked-prefill-size"] = DEMO_CHUNK_TOKENS
            notes.append(
                f"chunked-prefill-size {size if size is not None else 'default'} -> "
                f"{DEMO_CHUNK_TOKENS} on both replicas (a 60K-token prompt is 15 chunks here; "
                "variants that carry the chunk size show it)"
            )
        if "disable-radix-cache" not in changed and not args.get("disable-radix-cache"):
            args["disable-radix-cache"] = True
            notes.append("prefix cache off, so repeated prompts prefill in full in every block")
    return out, notes
