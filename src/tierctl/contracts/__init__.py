"""tierctl.contracts."""
