"""Simulated hosts on one machine, for tests and demos of fleets.

A host is a Linux network namespace with its own address on a bridge
(:mod:`~tierctl.testhosts.netns`), its own ``dockerd`` started inside it
(:mod:`~tierctl.testhosts.dockerd`) and its own ``tierctl agent serve`` listening on its address
(:mod:`~tierctl.testhosts.hostset`). Traffic to a host really crosses an interface, so a host
can be cut off (its link taken down) or slowed (``tc netem``). Needs root, iproute2 and
Debian's docker.io (``scripts/ensure-docker``); everything is stopped by pid and deleted on
close.
"""
