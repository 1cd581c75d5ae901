"""One streaming chat request through the client the backend names: the fast path (wire.py) or the openai SDK.

Takes a Backend, a ChatRequest, the read timeout and an optional delta callback; returns a Completion or
raises AttemptError, whichever client ran. The fast path opens plain sockets and goes through no proxy; a
proxy variable that would apply to a backend is refused (`check_proxies`) rather than silently bypassed.
"""

from __future__ import annotations

import urllib.request
from urllib.parse import urlsplit

from pipeline.backends.sdk import sdk_stream_chat
from pipeline.backends.sse import OnDelta
from pipeline.backends.wire import stream_chat
from pipeline.errors import UsageError
from pipeline.records import Backend, ChatRequest, Completion

CLIENTS = ("fast", "sdk")


async def chat(
    backend: Backend, request: ChatRequest, read_timeout: float, on_delta: OnDelta | None = None
) -> Completion:
    if backend.client == "sdk":
        return await sdk_stream_chat(backend, request, read_timeout, on_delta)
    return await stream_chat(backend, request, read_timeout, on_delta)


def proxy_for(url: str, proxies: dict[str, str] | None = None) -> str | None:
    """The proxy the environment (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY) names for this URL, if any."""
    proxies = urllib.request.getproxies() if proxies is None else proxies
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # public, not in typeshed
    if not proxy or bypass(parts.netloc, proxies):
        return None
    return proxy


def check_proxies(backends: list[Backend], proxies: dict[str, str] | None = None) -> None:
    for backend in backends:
        proxy = proxy_for(backend.base_url, proxies)
        if backend.client == "fast" and proxy:
            raise UsageError(
                f"backend {backend.name} ({backend.base_url}): a proxy is set for it ({proxy}) and the fast "
                f"client goes through none: set client 'sdk' (httpx honours proxies) or list the host in NO_PROXY"
            )
