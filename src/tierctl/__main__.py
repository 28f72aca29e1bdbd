"""``python -m tierctl`` runs the CLI."""

from tierctl.cli.main import main

if __name__ == "__main__":
    main()
