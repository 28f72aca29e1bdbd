"""The example tier run for real on this machine, above the lifecycle steps it drives.

- :mod:`tierctl.realtier.tier`: :class:`~tierctl.realtier.tier.RealTier`, the tiny-vllm example
  rendered and run: engines under the local rollout driver, the real router, Prometheus;
- :mod:`tierctl.realtier.traffic`: bounded client traffic through the proxy, every outcome kept;
- :mod:`tierctl.realtier.demo`: ``make demo-real`` (``tierctl real-engine demo``).

It sits beside :mod:`tierctl.demo` (it renders, rolls out, benches and reads out), over
:mod:`tierctl.realengine` (one engine and its environment) and :mod:`tierctl.runtime`.
"""
