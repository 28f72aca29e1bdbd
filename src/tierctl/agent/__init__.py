"""The per-host agent: the compose-manager API served over a deployment repository, running
the real ``docker compose`` against the host's engine (docs/agent.md).

:mod:`tierctl.agent.server` (the HTTP service, ``tierctl agent serve``),
:mod:`tierctl.agent.protocol` (what each call takes), :mod:`tierctl.agent.projects` (files by
tag, extracted per commit, nothing outside the projects directory) and
:mod:`tierctl.agent.oplog` (the append-only operation log).
"""
