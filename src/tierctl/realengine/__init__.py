"""The real engine on this machine: vLLM on CPU serving a tiny local Llama, behind a real router.

- :mod:`tierctl.realengine.env`: where the engine's virtualenv is (``scripts/ensure-vllm``
  makes it), and the tiny model, made once per recipe into a cache folder;
- :mod:`tierctl.realengine.process`: a server process in its own process group with its log
  in a file, started, probed until ready and stopped (the whole group) on every exit path;
- :mod:`tierctl.realengine.tiny_model`: the deterministic tiny-model maker (runs under the
  engine's virtualenv).

Nothing here downloads weights or data: the model is made locally, and the engine runs with
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``.
"""
