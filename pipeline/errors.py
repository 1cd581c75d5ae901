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


def fanout_error_in(caught: BaseException) -> FanoutError | None:
    """The FanoutError itself, or the first one a task group wrapped in an exception group (a planning ask
    that failed beside others), or None when the group holds something else too."""
    if isinstance(caught, FanoutError):
        return caught
    if isinstance(caught, BaseExceptionGroup):
        found = [fanout_error_in(inner) for inner in caught.exceptions]
        return found[0] if found and all(error is not None for error in found) else None
    return None
