"""Which fanout this is: the installed distribution's version, read from its metadata; a leaf, so the CLI's
--version and a bench record's host (bench/report/provenance.py) read it from one place."""

from __future__ import annotations

from importlib import metadata


def installed_version(*, missing: str) -> str:
    """The version pip installed; `missing` where fanout runs from a source tree that was never installed."""
    try:
        return metadata.version("fanout")
    except metadata.PackageNotFoundError:
        return missing
