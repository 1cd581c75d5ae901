"""The client's event-loop policy: uvloop when it is installed, the stock asyncio loop otherwise."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def fast_loop() -> Iterator[bool]:
    """Run the asyncio loops started inside on uvloop when it is installed (cheaper reads: the stock loop
    allocates a 256 KiB buffer per socket read); the previous policy comes back afterwards."""
    try:
        import uvloop
    except ImportError:
        yield False
        return
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield True
    finally:
        asyncio.set_event_loop_policy(previous)
