"""tierctl.render."""
