"""tierctl's own release, written once here (pyproject.toml's ``version``: tested).

``tierctl --version`` prints it without ``importlib.metadata``, whose import and scan of every
installed distribution cost more than the rest of the command.
"""

#: The release, as ``pyproject.toml`` names it.
VERSION = "0.1.0"
