"""Rollout drivers: compose-manager (HTTP agent), docker (compose CLI), local (processes)."""
