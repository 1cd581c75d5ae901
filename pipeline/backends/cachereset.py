"""Empty a backend's prefix cache before a bench level or repetition, where its engine offers a way.

Takes the open session, a Backend and its EngineInfo; returns a CacheResetDone saying what was asked, the
answers' statuses and the engine's caveat (engines.py owns which endpoint each engine has and what it
leaves behind). Never raises: a backend that refuses or fails is recorded as not reset, and the bench goes
on with that said in its record.
"""

from __future__ import annotations

import aiohttp

from pipeline.backends.engines import engine
from pipeline.backends.envelope import auth_headers
from pipeline.records import Backend, CacheResetDone, EngineInfo

RESET_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)


async def reset_prefix_cache(session: aiohttp.ClientSession, backend: Backend, info: EngineInfo) -> CacheResetDone:
    how = engine(info.kind).cache_reset
    if how is None:
        return CacheResetDone(backend=backend.name, asked=None, done=False, note=engine(info.kind).no_cache_reset)
    if how.per_slot and not info.slots:
        return CacheResetDone(
            backend=backend.name, asked=None, done=False, note="the engine did not report its slots to erase"
        )
    paths = [how.path.format(slot=slot) for slot in range(info.slots or 0)] if how.per_slot else [how.path]
    statuses, failure = [], ""
    for path in paths:
        status, detail = await _ask(session, backend, how.method, path)
        statuses.append(status)
        failure = failure or detail
    done = all(200 <= status < 300 for status in statuses)
    return CacheResetDone(
        backend=backend.name,
        asked=f"{how.method} {how.path}",
        done=done,
        statuses=statuses,
        note=how.caveat if done else f"{failure} ({how.caveat})",
    )


async def _ask(session: aiohttp.ClientSession, backend: Backend, method: str, path: str) -> tuple[int, str]:
    """The answer's status and, for a failure, the first line of its body (0: no answer)."""
    try:
        async with session.request(
            method, backend.root_url + path, headers=auth_headers(backend), timeout=RESET_TIMEOUT
        ) as response:
            body = "" if response.status < 300 else (await response.text())[:200]
            return response.status, f"{method} {path}: HTTP {response.status} {body.splitlines()[0] if body else ''}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return 0, f"{method} {path}: no answer ({type(exc).__name__})"
