"""tierctl.catalog."""
