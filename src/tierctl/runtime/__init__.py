"""Plumbing the lifecycle steps share, below all of them (it imports only the leaves).

- :mod:`tierctl.runtime.process`: a server as a local process in its own process group
  (:class:`~tierctl.runtime.process.ServerProcess`), ``free_port``, the log's tail;
- :mod:`tierctl.runtime.polling`: ``wait_until``, the one deadline loop;
- :mod:`tierctl.runtime.promtext`: the Prometheus text exposition parser (an engine's or the
  router's ``/metrics``);
- :mod:`tierctl.runtime.promapi`: the Prometheus HTTP API client (instant and range queries);
- :mod:`tierctl.runtime.local_prom`: a real Prometheus server run on a free loopback port;
- :mod:`tierctl.runtime.http_guard`: the client bounds every tierctl HTTP server holds (header
  and body deadlines and sizes, connections), and ``serve_guarded``.
"""
