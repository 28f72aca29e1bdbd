"""Hypothesis strategies shared by the test suites: generated tier specs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

FLAG_NAMES = [
    "chunked-prefill-size",
    "prefill-decode-interval",
    "max-running-requests",
    "mem-fraction-static",
    "tp-size",
    "attention-backend",
    "enable-metrics",
    "enable-mixed-chunk",
    "cuda-graph-bs",
    "json-model-override-args",
    "api-key-file",
]
DIGEST = "0" * 63 + "1"

scalar_values = st.one_of(
    st.integers(min_value=0, max_value=1_000_000),
    st.sampled_from([0.5, 0.82, 1.25]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.:/", min_size=1, max_size=12),
)
flag_values = st.one_of(
    scalar_values,
    st.just(True),
    st.lists(st.integers(min_value=1, max_value=512), min_size=1, max_size=4),
    st.fixed_dictionaries({"json": st.dictionaries(st.sampled_from("abc"), st.integers(0, 9))}),
    st.fixed_dictionaries({"repeat": st.lists(scalar_values, min_size=1, max_size=3)}),
)


@st.composite
def spec_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """A valid tier spec as plain data: random flags, overlays, replicas and overrides."""
    names = draw(st.lists(st.sampled_from(FLAG_NAMES), min_size=1, max_size=6, unique=True))
    base = {name: draw(flag_values) for name in names}
    # prefill-decode-interval always valued so the variant template can use it.
    base["prefill-decode-interval"] = draw(st.integers(0, 8))
    base["port"] = 30000
    overlay_flag = "enable-dynamic-batch-tokenizer"
    use_overlay = draw(st.booleans())
    n_replicas = draw(st.integers(1, 4))
    replicas: dict[str, Any] = {}
    for i in range(n_replicas):
        overrides: dict[str, Any] = {"port": 30001 + i}
        for name in draw(st.lists(st.sampled_from([*base]), max_size=3, unique=True)):
            if name in ("port", "prefill-decode-interval"):
                continue
            overrides[name] = draw(st.one_of(st.none(), flag_values))
        if draw(st.booleans()):
            overrides["prefill-decode-interval"] = draw(st.integers(0, 8))
        if draw(st.booleans()):
            overrides["new-flag-" + str(i)] = draw(scalar_values)
        replicas[f"r{i + 1}"] = {
            "gpus": [2 * i, 2 * i + 1],
            "role": draw(st.sampled_from([None, "control", "canary"])),
            "args": overrides,
            "env": {"REPLICA_INDEX": str(i)} if draw(st.booleans()) else {},
        }
    return {
        "tier": "gen",
        "host": "h1",
        "output": "compose.yaml",
        "engine": {
            "kind": "sglang",
            "version": "0.5.23",
            "image": f"example/sglang@sha256:{DIGEST}",
            "service": "eng-{replica}",
            "args": base,
            "env": {"QSPLIT": draw(st.sampled_from(["0", "1"]))},
            "overlays": {"ingestion": {overlay_flag: True}} if use_overlay else {},
        },
        "replicas": replicas,
        "telemetry": {
            "variant": "v{qsplit}{dyntok}-pdi{prefill-decode-interval}-{replica}",
            "tokens": {
                "qsplit": {"env": "QSPLIT", "equals": "1", "text": "-qsplit"},
                "dyntok": {"flag": overlay_flag, "text": "-dyntok"},
            },
            "places": ["service-labels", "log-tags", "collector-scrape-config"],
        },
        "services": {
            "proxy": {
                "role": "proxy",
                "compose": {
                    "image": f"example/proxy@sha256:{DIGEST}",
                    "command": ["--backends", "{{backends}}"],
                },
            },
            "collector": {
                "role": "collector",
                "scrape": {"target": "/etc/prometheus/prometheus.yml"},
                "compose": {"image": f"example/prom@sha256:{DIGEST}"},
            },
        },
    }
