"""tierctl.spec."""
