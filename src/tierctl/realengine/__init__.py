"""The real engine on this machine: vLLM on CPU serving a tiny local Llama, behind a real router.

The tier these make (engines, router, Prometheus, a rollout between two variants) is
:mod:`tierctl.realtier`, above the lifecycle steps it drives.

- :mod:`tierctl.realengine.env`: where the engine's virtualenv is (``scripts/ensure-vllm``
  makes it), and the tiny model, made once per recipe into a cache folder;
- :mod:`tierctl.realengine.engine`: one vLLM engine on CPU as a
  :class:`~tierctl.runtime.process.ServerProcess` (started, probed until ready, stopped);
- :mod:`tierctl.realengine.tiny_model`: the deterministic tiny-model maker (runs under the
  engine's virtualenv).

Nothing here downloads weights or data: the model is made locally, and the engine runs with
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``.
"""
