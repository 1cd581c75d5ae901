"""The HTTP envelope of a streamed chat request: everything a transport sends and checks outside the SSE body.

What goes out: `request_body` (the JSON: messages or prompt, sampling fields, streamed usage, `n` where more
than one choice is asked, the backend's model and extra fields), `request_headers` (the attempt's
X-Request-Id from `new_request_id`, the backend's own headers, its key as a Bearer token: `auth_headers`,
`api_key`). What comes back before any event is read: `status_error` (a non-200 status as an AttemptError
of kind http_<status>, with the server's Retry-After hint) and `is_event_stream` / `not_event_stream` (a
200 answer of another content type is a failure). `hide_key` keeps the key, whole or cut short, out of any error
text, `hide_key_in` out of an attempt's error. The transports use it: wire.py, aiohttp_chat.py, sdk.py; metrics.py,
cachereset.py and bench/load/prompts.py sign their own requests with `auth_headers`. The body itself is read by
sse.py.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from pipeline.backends.sse import AttemptError
from pipeline.records import Backend, ChatRequest, Endpoint, Outcome

REQUEST_ID_HEADER = "X-Request-Id"
HIDDEN_KEY = "<api key hidden>"
KEY_CUT_SHOWN = 4  # the characters of a key an error text cut short may end on: 'sk-a' tells nothing


def api_key(backend: Backend) -> str:
    """The key from the backend's own variable, else OPENAI_API_KEY (as the openai SDK reads it)."""
    if backend.api_key_env:
        return os.environ.get(backend.api_key_env, "")
    return os.environ.get("OPENAI_API_KEY", "")


def auth_headers(backend: Backend) -> dict[str, str]:
    key = api_key(backend)
    return {**backend.headers, **({"Authorization": f"Bearer {key}"} if key else {})}


def request_headers(backend: Backend, request_id: str | None) -> dict[str, str]:
    """Every header a chat request carries beyond the transport's own: its id (new_request_id), the backend's
    headers and the key."""
    return {**({REQUEST_ID_HEADER: request_id} if request_id else {}), **auth_headers(backend)}


def hide_key(text: str, backend: Backend) -> str:
    """A server may echo the Authorization header back in its error text; the key never leaves as data: whole, or
    cut short where the text ends (status_error keeps a body's first 200 characters, less than a long token)."""
    key = api_key(backend)
    if not key:
        return text
    text = text.replace(key, HIDDEN_KEY)
    cut = next((size for size in range(len(key) - 1, KEY_CUT_SHOWN, -1) if text.endswith(key[:size])), 0)
    return text[: len(text) - cut] + HIDDEN_KEY if cut else text


def hide_key_in(error: AttemptError, backend: Backend) -> None:
    """The key hidden in an attempt's error, its detail and its message both (hide_key), before it is raised on."""
    error.detail = hide_key(error.detail, backend)
    error.args = (hide_key(str(error), backend),)


def request_body(backend: Backend, request: ChatRequest) -> dict[str, Any]:
    """The JSON body: `messages` to chat completions, the one user message's text as `prompt` to text
    completions (no chat template), and the same fields otherwise (usage streamed at the end); `n` only where
    the request asks for more than one choice."""
    body: dict[str, Any] = {
        **({"prompt": request.prompt} if request.endpoint is Endpoint.COMPLETIONS else {"messages": request.messages}),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.choices > 1:
        body["n"] = request.choices
    if backend.model:
        body["model"] = backend.model
    body.update(request.extra)
    body.update(backend.extra_body)
    return body


def new_request_id() -> str:
    """The X-Request-Id of one attempt: vLLM takes it as its own request id, and any proxy's log can be
    joined with the rows by it."""
    return "fanout-" + secrets.token_hex(8)


def status_error(status: int, body: str, retry_after: str | None) -> AttemptError:
    hint = None
    if retry_after:
        try:
            hint = float(retry_after)
        except ValueError:
            hint = None
    return AttemptError(Outcome.http(status), body[:200].strip(), hint)


def is_event_stream(content_type: bytes) -> bool:
    """An answer that says nothing of its type is read as the stream it should be; one that names another
    type (an HTML error page from a proxy, a whole JSON answer) is not a stream."""
    return not content_type or content_type.startswith(b"text/event-stream")


def not_event_stream(content_type: str) -> AttemptError:
    return AttemptError(Outcome.NOT_EVENT_STREAM, f"a 200 answer of type {content_type[:80]!r}, not an event stream")
