"""A generated fleet of tier specs (N hosts x M replicas), shared by the scale benchmarks."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
GLM_SPEC = ROOT / "examples" / "glm53-long-context" / "tier.yaml"


def fleet_spec_texts(hosts: int = 100, replicas: int = 8) -> list[tuple[str, str]]:
    """(name, YAML text) per host: the GLM example with ``replicas`` single-GPU replicas,
    half canaries at interval 2, on host gpuNNN."""
    yaml = YAML(typ="safe", pure=True)
    base = yaml.load(GLM_SPEC.read_text())
    out: list[tuple[str, str]] = []
    from tierctl.render.yaml_emit import dump_yaml

    for h in range(hosts):
        spec = dict(base)
        spec["tier"] = f"glm53-host{h:03d}"
        spec["host"] = f"gpu{h:03d}"
        spec["engine"] = dict(base["engine"], args=dict(base["engine"]["args"], **{"tp-size": 1}))
        spec["replicas"] = {
            f"r{i + 1}": {
                "gpus": [i],
                "role": "canary" if i % 2 else "control",
                "args": {
                    "port": 30001 + i,
                    "dist-init-addr": f"127.0.0.1:{29510 + i}",
                    **({"prefill-decode-interval": 2} if i % 2 else {}),
                },
            }
            for i in range(replicas)
        }
        out.append((f"{spec['tier']}.yaml", dump_yaml(spec)))
    return out


def write_fleet(directory: Path, hosts: int = 100, replicas: int = 8) -> list[Path]:
    """Write the fleet's specs into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in fleet_spec_texts(hosts, replicas):
        path = directory / name
        path.write_text(text)
        paths.append(path)
    return paths
