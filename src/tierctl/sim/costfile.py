"""Cost models as files: what ``tierctl sim fit --output`` writes and ``--cost-model`` reads.

A file is one JSON object::

    {"kind": "tierctl-cost-model", "format": 1,
     "model": {"name": ..., "prefill_base_s": ..., ...every CostModel field...},
     "provenance": {"fitted_on": [...], "fitted_at": "2026-12-01T08:30:00Z",
                    "method": "...", "base": "glm53-flash-w4afp8-tp4-h200",
                    "samples": {...}, "residuals": {...}}}

The provenance says what the coefficients were fitted on, when, how, and how well they fit
(residuals), so a reader of a simulated figure can tell how far to trust it. A hand-written
file needs only ``model``; missing coefficients are taken from ``base`` when it names a preset.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierctl.errors import InputError, Location
from tierctl.readers import load_json, read_text
from tierctl.sim.config import MAX_COUNT
from tierctl.sim.cost import DEFAULT_PRESET, PRESETS, CostModel, preset

if TYPE_CHECKING:
    from tierctl.sim.uncertainty import FitUncertainty

KIND = "tierctl-cost-model"
FORMAT = 1
_FIELDS = {f.name: f.type for f in dataclasses.fields(CostModel)}
_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(CostModel) if f.default is not dataclasses.MISSING
}
_INT_FIELDS = (
    "kv_pool_tokens",
    "max_running_requests",
    "chunked_prefill_size",
    "step_jitter_block",
)


def cost_model_doc(model: CostModel, provenance: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of a cost model and where it came from."""
    prov = {"fitted_at": _now(), **provenance}
    return {"kind": KIND, "format": FORMAT, "model": dataclasses.asdict(model), "provenance": prov}


def write_cost_model(path: str | Path, model: CostModel, provenance: dict[str, Any]) -> Path:
    """Write a cost model file through the checked writer (atomic; a device, a folder or an
    unwritable place is refused with a located message); it replaces an existing file: the CLI
    asks (``--force``) before overwriting."""
    from tierctl.paths import write_owned

    p = Path(path)
    doc = cost_model_doc(model, provenance)
    write_owned(p, json.dumps(doc, indent=1) + "\n", ours=lambda _text: True, force=True,
                what="cost model")  # fmt: skip
    return p


def read_cost_model(path: str | Path) -> tuple[CostModel, dict[str, Any]]:
    """Read a cost model file; returns the model and its provenance.

    Raises:
        InputError: the file is missing, not JSON, not a cost model, or a coefficient is
            missing, not a number or negative (the field is named).
    """
    p = Path(path)
    loc = Location(file=str(p))
    doc = load_json(read_text(p, what="cost model"), str(p), constants=True)
    if (
        not isinstance(doc, dict)
        or doc.get("kind") != KIND
        or not isinstance(doc.get("model"), dict)
    ):
        raise InputError(
            "not a tierctl cost model file",
            location=loc,
            rule=f'a cost model file is a JSON object with "kind": "{KIND}" and a "model" object',
            value=type(doc).__name__ if not isinstance(doc, dict) else doc.get("kind"),
            fix="write it with `tierctl sim fit` (its output file; see docs/sim.md)",
        )
    prov = doc.get("provenance") or {}
    raw: dict[str, Any] = doc["model"]
    base_name = raw.get("base") or (prov.get("base") if isinstance(prov, dict) else None)
    base = PRESETS.get(str(base_name)) if base_name else None
    values: dict[str, Any] = dataclasses.asdict(base) if base is not None else {}
    for key, value in raw.items():
        if key == "base":
            continue
        if key not in _FIELDS:
            raise InputError(
                f"unknown cost model field {key!r}",
                location=Location(file=str(p), path=f"model.{key}"),
                rule="model fields are the CostModel coefficients",
                value=key,
                fix="use one of: " + ", ".join(_FIELDS),
            )
        values[key] = value
    values.setdefault("name", p.stem)
    for key in _FIELDS:
        if key not in values and key in _DEFAULTS:
            values[key] = _DEFAULTS[key]
        if key not in values:
            raise InputError(
                f"cost model field {key!r} is missing",
                location=Location(file=str(p), path=f"model.{key}"),
                rule='every coefficient is given, or "base" names a preset to fill them from',
                fix=f'add "{key}" or "base": "{DEFAULT_PRESET}"',
            )
        if key == "name":
            continue
        v = values[key]
        if key == "device":
            if v not in DEVICES:
                raise InputError(
                    f"cost model field 'device' must be one of {', '.join(map(repr, DEVICES))}",
                    location=Location(file=str(p), path="model.device"),
                    rule="device is the accelerator the coefficients were measured on "
                    '("" when unknown)',
                    value=v,
                    fix='give "cuda", "cpu" or "" (`tierctl sim fit --device`)',
                )
            continue
        if key in _RATE_LISTS:
            values[key] = _rates(v, p, key)
            continue
        most = _most(key)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= most
        if key in _INT_FIELDS:
            ok = ok and float(v).is_integer()
        if not ok:
            raise InputError(
                f"cost model field {key!r} must be a non-negative number, at most {most:g}",
                location=Location(file=str(p), path=f"model.{key}"),
                # A finite bound: 1e308 s per context token made every step inf, then NaN.
                rule=f"0 <= {key} <= {most:g}",
                value=v,
                fix="give seconds (or tokens) as a number >= 0",
            )
        values[key] = int(v) if key in _INT_FIELDS else float(v)
    values["name"] = str(values["name"])
    return CostModel(**values), prov if isinstance(prov, dict) else {}


#: The devices a cost model may name ("": unknown).
DEVICES = ("", "cuda", "cpu")

#: Fields that are lists of probabilities (the acceptance of each draft position).
_RATE_LISTS = ("spec_accept_by_position",)


def _rates(v: Any, p: Path, key: str) -> tuple[float, ...]:
    """A list of probabilities, each in [0, 1] (at most 64: a draft is no longer)."""
    ok = isinstance(v, list | tuple) and len(v) <= 64
    ok = ok and all(
        isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 1 for x in v
    )
    if not ok:
        raise InputError(
            f"cost model field {key!r} must be a list of at most 64 probabilities",
            location=Location(file=str(p), path=f"model.{key}"),
            rule=f"{key} is [p0, p1, ...] with each 0 <= p <= 1",
            value=v if not isinstance(v, list) else v[:8],
            fix="write it with `tierctl sim fit` from an engine's /metrics, or give probabilities",
        )
    return tuple(float(x) for x in v)


#: The largest coefficient in seconds (one hour a token, a sequence or a step: a model past
#: it is no engine, and its products overflow a float), and the largest step jitter (a
#: log-normal sigma; fitted ones are about 0.1).
MAX_SECONDS = 3600.0
MAX_JITTER = 5.0


def _most(key: str) -> float:
    """The largest value cost model field ``key`` takes."""
    if key in ("step_jitter", "step_jitter_slow"):
        return MAX_JITTER
    return MAX_SECONDS if key.endswith("_s") else float(MAX_COUNT)


def resolve_cost(preset_name: str | None, path: str | None) -> CostModel:
    """The cost model a command was given: a file when ``path`` is set, else the preset."""
    if path is not None:
        return read_cost_model(path)[0]
    return preset(preset_name or DEFAULT_PRESET)


def resolve_fit(preset_name: str | None, path: str | None) -> tuple[CostModel, FitUncertainty]:
    """The cost model a command was given and what it knows about itself (its bootstrap
    refits and fit domain, from a file's provenance; nothing for a preset)."""
    from tierctl.sim.uncertainty import FitUncertainty

    if path is not None:
        model, prov = read_cost_model(path)
        return model, FitUncertainty.from_provenance(model, prov)
    return preset(preset_name or DEFAULT_PRESET), FitUncertainty()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
