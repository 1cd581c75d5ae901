"""One exception family for the package; only the CLI turns these into exit codes."""


class FanoutError(Exception):
    """A run failed (exit 1)."""

    exit_code = 1


class UsageError(FanoutError):
    """Bad flags, config or input (exit 2)."""

    exit_code = 2


class BackendError(FanoutError):
    """A backend could not be reached or answered wrongly (exit 1)."""


class GateError(FanoutError):
    """An audit found defects the user asked to gate on (exit 3)."""

    exit_code = 3
