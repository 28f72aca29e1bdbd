"""Law: a spec that uses only real flags renders to a file on which all seven contracts hold.

The shared strategy (tests/strategies.py) draws arbitrary flag names, so it exercises every
contract but the catalog one; this strategy varies the GLM example with flags and values
taken from the SGLang 0.5.23 catalog, so the catalog contract is held to the law as well.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import GLM_SPEC
from tierctl.contracts import load_compose, validate
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec_text

BASE: dict[str, Any] = yaml.safe_load(GLM_SPEC.read_text())

# (flag, strategy of values the 0.5.23 catalog accepts)
REAL_FLAGS: list[tuple[str, st.SearchStrategy[Any]]] = [
    ("prefill-decode-interval", st.integers(0, 8)),
    ("chunked-prefill-size", st.sampled_from([4096, 8192, 16384, 32768])),
    ("max-running-requests", st.integers(1, 64)),
    ("schedule-policy", st.sampled_from(["fcfs", "lpm", "priority"])),
    ("enable-mixed-chunk", st.just(True)),
    ("mem-fraction-static", st.sampled_from([0.7, 0.8, 0.85])),
    ("dynamic-batch-tokenizer-batch-size", st.integers(1, 64)),
    ("max-total-tokens", st.sampled_from([65536, 131072, "128K"])),
]


@st.composite
def real_flag_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec = dict(BASE)
    n = draw(st.integers(1, 4))
    replicas: dict[str, Any] = {}
    for i in range(n):
        overrides: dict[str, Any] = {"port": 30001 + i, "dist-init-addr": f"127.0.0.1:{29510 + i}"}
        for name, values in draw(
            st.lists(st.sampled_from(REAL_FLAGS), max_size=3, unique_by=lambda f: f[0])
        ):
            overrides[name] = draw(values)
        replicas[f"r{i + 1}"] = {
            "gpus": [2 * i, 2 * i + 1],
            "role": draw(st.sampled_from([None, "control", "canary"])),
            "args": overrides,
            "env": {"SGLANG_DSA_INDEXER_QSPLIT": "1"} if draw(st.booleans()) else {},
        }
    spec["engine"] = dict(BASE["engine"], args=dict(BASE["engine"]["args"], **{"tp-size": 2}))
    spec["replicas"] = replicas
    return spec


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(real_flag_specs())
def test_render_then_validate_is_clean(data: dict[str, Any]) -> None:
    spec = load_spec_text(dump_yaml(data), "gen.yaml")
    report = validate(spec, [load_compose(render_compose(spec), source="gen-compose.yaml")])
    assert report.violations == (), report.text()
