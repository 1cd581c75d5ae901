"""One exception family for the package; only the CLI turns these into exit codes. Also what the CLI needs to
say of a full disk (DISK_ERRORS) and of SIGTERM (Terminated).
"""

from __future__ import annotations

import errno


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


class Interrupted(FanoutError):
    """A run stopped by SIGINT (exit 130) or SIGTERM (exit 143): 128 + the signal's number, as shells report."""

    def __init__(self, message: str, *, signal_number: int):
        super().__init__(message)
        self.exit_code = 128 + signal_number


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so the run unwinds the same way."""


# An OSError a run cannot get past by itself: the disk, the quota or the permissions, and the words for each.
DISK_ERRORS = {
    errno.ENOSPC: "no space left on device writing",
    errno.EDQUOT: "disk quota exceeded writing",
    errno.EROFS: "read-only file system: cannot write",
    errno.EACCES: "permission denied on",
    errno.EPERM: "operation not permitted on",
}


def disk_error_in(caught: BaseException | None) -> OSError | None:
    """The OSError of DISK_ERRORS in `caught`: itself, inside an exception group, or its cause or context."""
    seen: set[int] = set()
    while caught is not None and id(caught) not in seen:
        seen.add(id(caught))
        if isinstance(caught, OSError) and caught.errno in DISK_ERRORS:
            return caught
        if isinstance(caught, BaseExceptionGroup):
            for inner in caught.exceptions:
                if (found := disk_error_in(inner)) is not None:
                    return found
        caught = caught.__cause__ or caught.__context__
    return None


def disk_words(error: OSError) -> str:
    """One line for a DISK_ERRORS error: what happened and to which file."""
    return f"{DISK_ERRORS.get(error.errno or 0, 'cannot write')} {error.filename or 'a file'}"
