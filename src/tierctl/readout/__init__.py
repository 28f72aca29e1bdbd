"""tierctl.readout."""
