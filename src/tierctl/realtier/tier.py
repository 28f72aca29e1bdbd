"""The tiny example tiers, for real, on free loopback ports: engines, router, Prometheus.

:class:`RealTier` copies ``examples/tiny-vllm/tier.yaml`` (or, with ``engine="sglang"``,
``examples/tiny-sglang/tier.yaml``) into a work folder with free ports,
renders the OLD side (r2 as the control: the canary's override taken out) and a NEW side (the
example's canary, or any override given), and runs what the rendered files say:

- the engines under the local driver with the real engine (vLLM or SGLang on CPU), the model bind mount
  pointing at the tiny model;
- the proxy from the rendered ``router`` service's command (worker URLs and health settings
  as rendered), through :mod:`tierctl.proxies.sglang_router`;
- Debian's Prometheus with the rendered collector's scrape config.

Used by ``make demo-real``, the real-engine tests and ``benchmarks/real_engine.py``. Everything
it starts is stopped by :meth:`RealTier.stop` (also on ``with`` exit).
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tierctl.errors import RuntimeFailure
from tierctl.proxies.sglang_router import SglangRouter, settings_from_argv
from tierctl.readers import read_text
from tierctl.realengine import env as realenv
from tierctl.realengine.registry import REAL_ENGINES, real_engine
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec_text

_EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: The bundled tiny tier of each engine that runs for real here.
EXAMPLES = {kind: _EXAMPLES / f"tiny-{kind}" / "tier.yaml" for kind in REAL_ENGINES}
#: The default engine (the registry's first) and its example.
DEFAULT_ENGINE = next(iter(REAL_ENGINES))
EXAMPLE = EXAMPLES[DEFAULT_ENGINE]
REPLICAS = ("r1", "r2")
#: The vLLM example's canary change (the r2 override that OLD does not have).
CANARY_FLAG = "max-num-seqs"


class RealTier:
    """The example tier in ``workdir``; nothing runs until :meth:`start`."""

    def __init__(
        self,
        workdir: Path,
        *,
        engine: str = DEFAULT_ENGINE,
        spec: Path | None = None,
        start_timeout_s: float = 420.0,
        python: Path | None = None,
        log: Callable[[str], None] = lambda _m: None,
    ) -> None:
        """Prepare the tier.

        Args:
            workdir: Where the rendered files, state, logs and Prometheus data go.
            engine: The real engine (``vllm`` or ``sglang``): its example and virtualenv.
            spec: The tier spec to copy (default: the engine's example).
            start_timeout_s: How long one engine has to answer ``/health``.
            python: The engine's python (default: the engine's CPU virtualenv, installed if
                needed).
            log: Receives one line per thing started or stopped.
        """
        from tierctl.spec.loader import parse_yaml

        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        spec = spec or EXAMPLES[engine]
        self.python = python or real_engine(engine).ensure_python()
        self.model = realenv.tiny_model(self.python)
        self._log = log
        data, _ = parse_yaml(read_text(spec, what="spec"), str(spec))
        self._doc: dict[str, Any] = copy.deepcopy(data)
        self.ports = {name: free_port() for name in REPLICAS}
        self.router_port = free_port()
        self.router_metrics_port = free_port()
        for name, port in self.ports.items():
            self._doc["replicas"][name].setdefault("args", {})["port"] = port
        command = self._doc["services"]["router"]["compose"]["command"]
        _set_after(command, "--port", str(self.router_port))
        _set_after(command, "--prometheus-port", str(self.router_metrics_port))
        self.canary_args: dict[str, Any] = {
            k: v for k, v in self._doc["replicas"]["r2"]["args"].items() if k != "port"
        }
        #: r2's overrides now running (None: the control's flags, as OLD starts it).
        self.r2_args: dict[str, Any] | None = None
        self.state_dir = workdir / "local"
        self.start_timeout_s = start_timeout_s
        self.driver = self._make_driver()
        self.router: SglangRouter | None = None
        self.prometheus: Any = None
        self.old_path = workdir / "old.yaml"

    def _make_driver(self) -> Any:
        from tierctl.rollout.drivers.local import LocalDriver
        from tierctl.rollout.roles import infer_role

        tier = self

        class TierDriver(LocalDriver):
            """The local driver, and the tier's collector: a step that applies the collector
            service reloads the tier's Prometheus with that side's rendered scrape config
            (what recreating the collector container does), so a rollout's collector step
            and its ``prometheus-variants`` gate run against the real Prometheus."""

            def apply(self, dep: Any, services: list[str]) -> None:
                super().apply(dep, services)
                collectors = [
                    s for s in services if infer_role(s, dep.services[s]).role == "collector"
                ]
                if collectors and tier.prometheus is not None:
                    tier.prometheus.reload(scrape_config(dep))
                    tier._log(f"Prometheus reloaded with {dep.ref.path}'s scrape config")

        return TierDriver(
            self.state_dir,
            engine="real",
            engine_python=self.python,
            start_timeout_s=self.start_timeout_s,
            # Beyond the engines' --shutdown-timeout (30 s): a drain is not cut short.
            stop_timeout_s=45.0,
        )

    # --- files ---------------------------------------------------------------------------

    def spec_doc(self, r2_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The spec with r2's overrides replaced by ``r2_args`` (None: r2 as the control)."""
        doc = copy.deepcopy(self._doc)
        args = {"port": self.ports["r2"], **(r2_args or {})}
        doc["replicas"]["r2"]["args"] = args
        return doc

    def write_side(self, name: str, r2_args: Mapping[str, Any] | None = None) -> Path:
        """Render one side into ``workdir/NAME.yaml`` (its spec beside it); returns its path."""
        doc = self.spec_doc(r2_args)
        doc["output"] = f"{name}.yaml"
        spec_path = self.workdir / f"{name}.tier.yaml"
        text = dump_yaml(doc)
        spec_path.write_text(text)
        out = self.workdir / f"{name}.yaml"
        out.write_text(render_compose(load_spec_text(text, str(spec_path)), spec_path))
        return out

    def environment(self) -> dict[str, str]:
        """Variables the rendered files need (the model mount)."""
        return {"TIERCTL_TINY_MODEL": str(self.model)}

    # --- running -------------------------------------------------------------------------

    def start(self) -> dict[str, float]:
        """Start r1 and r2 (OLD: both at the control's flags) together, then the router and
        Prometheus. Returns each engine's start-up seconds."""
        from tierctl.rollout.executor import load_sides
        from tierctl.rollout.planner import plan_files

        os.environ.update(self.environment())
        self.write_side("old")
        old, _ = load_sides(plan_files(str(self.old_path), str(self.old_path)))
        times: dict[str, float] = {}
        errors: list[BaseException] = []

        def start_one(service: str) -> None:
            import time

            t0 = time.monotonic()
            try:
                self.driver.apply(old, [service])
                times[service] = time.monotonic() - t0
            except BaseException as exc:  # reported below, after both threads finish
                errors.append(exc)

        self._log(f"starting r1 and r2 ({self.engine} on CPU; well under a minute each when idle)")
        threads = [
            threading.Thread(target=start_one, args=(self.service(r),), daemon=True)
            for r in REPLICAS
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise errors[0]
        self.start_router(old)
        self.start_prometheus(old)
        return times

    def service(self, replica: str) -> str:
        """The compose service of a replica."""
        return str(self._doc["engine"]["service"]).replace("{replica}", replica)

    def start_router(self, dep: Any) -> SglangRouter:
        """The proxy as the rendered ``router`` service says, in front of the replicas."""
        settings = settings_from_argv(dep.argv("router"), where="the router service's command")
        self.router = SglangRouter(
            settings,
            self.workdir / "router.log",
            binary=realenv.router_binary(self.python) or "sglang-router",
        )
        self._log(
            f"starting sglang-router on {self.router.url} -> {', '.join(settings.worker_urls)}"
        )
        self.router.start(ready_timeout_s=120)
        return self.router

    def start_prometheus(self, dep: Any) -> Any:
        """Prometheus with the rendered collector scrape config (None when not installed)."""
        from tierctl.runtime.local_prom import LocalPrometheus, prometheus_binaries

        found = prometheus_binaries()
        if found is None:
            self._log("prometheus is not installed: no collector (readout needs it)")
            return None
        config = scrape_config(dep)
        self.prometheus = LocalPrometheus(self.workdir / "prometheus", config, binary=found[0])
        self.prometheus.__enter__()
        self._log(f"Prometheus on {self.prometheus.url} scraping both engines every second")
        return self.prometheus

    @property
    def served_model(self) -> str:
        """The name the engines serve the model under (``--served-model-name``)."""
        return str(self._doc["engine"]["args"].get("served-model-name", "tiny-llama"))

    def url(self, replica: str) -> str:
        """An engine's base URL."""
        return f"http://127.0.0.1:{self.ports[replica]}"

    def pid(self, replica: str) -> int:
        """The running engine's pid (the local driver's state)."""
        return int(self.driver.state()[self.service(replica)]["pid"])

    def stop(self) -> None:
        """Stop the router, Prometheus and every engine (idempotent)."""
        if self.router is not None:
            self.router.stop()
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None
        self.driver.down_all()

    def __enter__(self) -> RealTier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def scrape_config(dep: Any) -> str:
    """The rendered collector's scrape config (the ``configs`` entry it mounts) as Prometheus
    config text."""
    from tierctl.rollout.normalise import CONFIGS_KEY

    for svc in dep.services.values():
        for cfg in (svc.get(CONFIGS_KEY) or {}).values():
            content = cfg.get("content") if isinstance(cfg, dict) else None
            if isinstance(content, str) and "scrape_configs" in content:
                return content
    raise RuntimeFailure(
        "the rendered file has no collector scrape config",
        rule="the collector's scrape config is rendered from the spec",
        fix="give the collector service a `scrape:` section",
    )


def _set_after(argv: list[Any], flag: str, value: str) -> None:
    if flag not in argv:
        raise RuntimeFailure(f"the router command has no {flag}")
    argv[argv.index(flag) + 1] = value


@contextmanager
def running_tier(workdir: Path, **kwargs: Any) -> Iterator[RealTier]:
    """A started :class:`RealTier`, stopped on exit."""
    tier = RealTier(workdir, **kwargs)
    try:
        tier.start()
        yield tier
    finally:
        tier.stop()
