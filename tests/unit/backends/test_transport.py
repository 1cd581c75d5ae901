"""Every chat client the pool can be given takes a request as the Transport protocol says
(pipeline/backends/transport.py): the same parameters in the same order, `on_delta` optional."""

from __future__ import annotations

import inspect

import pytest

from pipeline.backends.chat import chat
from pipeline.backends.chatworkers import ChatWorkers
from pipeline.backends.raychat import RayChatWorkers
from pipeline.backends.sdk import sdk_stream_chat
from pipeline.backends.transport import Transport
from pipeline.backends.wire import stream_chat


def parameters(call) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(call).parameters.values() if p.name != "self"]


@pytest.mark.parametrize(
    "client", [chat, stream_chat, sdk_stream_chat, ChatWorkers.chat, RayChatWorkers.chat], ids=lambda c: c.__qualname__
)
def test_each_chat_client_takes_what_a_transport_is_given(client):
    wanted = parameters(Transport.__call__)
    assert [name for name, _ in parameters(client)] == [name for name, _ in wanted]
    assert parameters(client)[-1] == ("on_delta", None)
    assert inspect.iscoroutinefunction(client)
