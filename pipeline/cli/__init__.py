"""The command line: `fanout` (the console script) and `python -m pipeline` both call `main`."""

from pipeline.cli.main import main

__all__ = ["main"]
