"""Inference proxies tierctl can launch and read: the real router in front of a tier's replicas.

- :mod:`tierctl.proxies.sglang_router`: the SGLang model gateway (``sglang-router`` on PyPI),
  launched with the tier's worker URLs and health-check settings; its worker health and request
  counters read back over HTTP.
"""
