"""The ``tierctl`` command line: thin commands over the library."""
