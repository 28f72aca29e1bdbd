"""tierctl.rollout."""
