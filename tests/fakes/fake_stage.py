"""A FAKE stage for CLI tests: in place of a command's stage (`book`, `plan`, `run_quality`, `run_frontier`) it
writes to the `fanout` log as a run does (run.log in its folder, the terminal) and then fails at once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from pipeline.book.folder import RunFolder, attach_run_log
from pipeline.errors import FanoutError

INFO_LINE = "sampling: default for writing, default for planning (fake)"
WARNING_LINE = "b0 answered 500 to a planning request (fake)"
ERROR = "no backend has answered for 60 s (fake)"


def failing_stage(folder: Path) -> Callable[..., Awaitable[None]]:
    """An async stage taking any arguments: it logs INFO_LINE and WARNING_LINE (to run.log in `folder` too),
    then raises FanoutError(ERROR)."""

    async def stage(*args: object, **kwargs: object) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        handler = attach_run_log(RunFolder(folder))
        log = logging.getLogger("fanout")
        try:
            log.info(INFO_LINE)
            log.warning(WARNING_LINE)
        finally:
            log.removeHandler(handler)
            handler.close()
        raise FanoutError(ERROR)

    return stage
