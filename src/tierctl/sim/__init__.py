"""tierctl.sim: a model of the SGLang scheduler, offline and as an OpenAI-compatible server.

The library API::

    from tierctl.sim import EngineConfig, simulate, generate
    cfg = EngineConfig.from_argv(["--chunked-prefill-size", "16384",
                                  "--prefill-decode-interval", "2"])
    result = simulate(cfg, generate("field", seed=0), "glm53-flash-w4afp8-tp4-h200")
    result.summary.tpot_p50_s

The server (``tierctl sim serve``) lives in :mod:`tierctl.sim.server` and needs the ``sim``
extra (aiohttp, tokenizers, prometheus-client); nothing here imports it.
"""

from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import PRESETS, CostModel, fit, preset
from tierctl.sim.engine import Round, Scheduler
from tierctl.sim.result import RatioRow, RequestResult, SimResult, SimSummary, ratio_table
from tierctl.sim.simulate import Comparison, compare, simulate
from tierctl.sim.sources import EngineSource, WorkloadSource, compare_sims, run_sim
from tierctl.sim.workload import SimRequest, Workload, generate
from tierctl.sim.workload_traces import read_workload, write_jsonl

__all__ = [
    "PRESETS",
    "Comparison",
    "CostModel",
    "EngineConfig",
    "EngineSource",
    "RatioRow",
    "RequestResult",
    "Round",
    "Scheduler",
    "SimRequest",
    "SimResult",
    "SimSummary",
    "Workload",
    "WorkloadSource",
    "compare",
    "compare_sims",
    "fit",
    "generate",
    "preset",
    "ratio_table",
    "read_workload",
    "run_sim",
    "simulate",
    "write_jsonl",
]
