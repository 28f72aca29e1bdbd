"""tierctl.bench."""
