"""tierctl.sim."""
