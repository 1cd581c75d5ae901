"""What users expect of a request, on both clients (the fast path and the openai SDK), against a FAKE engine:
headers, extra body fields, OPENAI_API_KEY and OPENAI_BASE_URL as fallbacks, proxies refused on the fast
path, failures of the SDK path mapped to the pool's failure kinds, the key kept out of every error (the
SDK's one-off requests' too)."""

from __future__ import annotations

import pytest

from pipeline.backends.chat import chat, check_proxies, proxy_for
from pipeline.backends.envelope import KEY_CUT_SHOWN
from pipeline.backends.sdk import close_sdk_clients, sdk_chat
from pipeline.backends.sse import AttemptError
from pipeline.cli import main
from pipeline.config import Settings, load_settings
from pipeline.errors import UsageError
from pipeline.records import Backend, ChatRequest
from tests.fakes.fake_engine import FakeEngine

pytestmark = pytest.mark.anyio
REQUEST = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=6, extra={"top_k": 5}, tag="t")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
async def engine():
    fake = await FakeEngine(tokens=6).start()
    yield fake
    await close_sdk_clients()  # as the fleet does when it closes
    await fake.stop()


@pytest.mark.parametrize("client", ["fast", "sdk"])
async def test_headers_extra_body_and_the_openai_key_reach_the_engine(engine, client, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    settings = Settings(client=client, headers={"X-Team": "books"}, extra_body={"top_k": 40, "min_p": 0.1})
    backend = settings.request_options(Backend(name="b0", base_url=engine.url, headers={"X-Own": "1"}))
    completion = await chat(backend, REQUEST, read_timeout=5)
    assert completion.text.split() == [f"w{i}" for i in range(6)] and completion.completion_tokens == 6
    headers, body = engine.headers[-1], engine.bodies[-1]
    assert headers["x-team"] == "books" and headers["x-own"] == "1"
    assert engine.authorizations[-1] == "Bearer sk-fallback"
    assert body["top_k"] == 40 and body["min_p"] == 0.1  # the run's extra body is merged last


async def test_the_sdk_path_fails_with_the_pools_failure_kinds(engine):
    backend = Backend(name="b0", base_url=engine.url, client="sdk")
    engine.modes.extend(["http_500", "http_429"])
    with pytest.raises(AttemptError) as first:
        await chat(backend, REQUEST, read_timeout=5)
    assert first.value.kind == "http_500" and not first.value.blames_request
    with pytest.raises(AttemptError) as second:
        await chat(backend, REQUEST, read_timeout=5)
    assert second.value.kind == "http_429" and second.value.retry_after == pytest.approx(0.2)
    unreachable = Backend(name="b1", base_url="http://127.0.0.1:9/v1", client="sdk")
    with pytest.raises(AttemptError) as refused:
        await chat(unreachable, REQUEST, read_timeout=5)
    assert refused.value.kind == "connect"


@pytest.mark.parametrize("key", ["sk-secret-123", "ey" + "J0eXAiOiJKV1Qi" * 25], ids=["short", "token-of-352"])
@pytest.mark.parametrize("client", ["fast", "sdk", "sdk_chat"])
async def test_a_key_the_server_echoes_never_reaches_the_error(engine, client, key, monkeypatch):
    """Whole, or cut short where the error keeps only the body's first 200 characters (a long token's); on both
    clients, and on the SDK's one-off request (model checks) too."""
    monkeypatch.setenv("FANOUT_TEST_KEY", key)
    kind = "sdk" if client == "sdk_chat" else client
    backend = Backend(name="b0", base_url=engine.url, client=kind, api_key_env="FANOUT_TEST_KEY")
    engine.modes.append("echo_auth")  # a 500 whose error message repeats the Authorization header
    with pytest.raises(AttemptError) as failed:
        await (sdk_chat(backend, REQUEST) if client == "sdk_chat" else chat(backend, REQUEST, read_timeout=5))
    assert engine.authorizations[-1] == f"Bearer {key}"
    assert failed.value.kind == "http_500" and "Bearer <api key hidden>" in failed.value.detail
    assert key[: KEY_CUT_SHOWN + 1] not in failed.value.detail + str(failed.value)


def test_a_proxy_is_refused_on_the_fast_path_and_honoured_by_the_sdk():
    proxies = {"https": "http://proxy:3128", "http": "http://proxy:3128", "no": "localhost,.internal"}
    fleet = [Backend(name="far", base_url="https://api.example.com/v1")]
    assert proxy_for("https://api.example.com/v1", proxies) == "http://proxy:3128"
    assert proxy_for("http://gpu.internal:8000/v1", proxies) is None  # NO_PROXY
    with pytest.raises(UsageError, match="backend far .*a proxy is set for it .*client 'sdk'"):
        check_proxies(fleet, proxies)
    check_proxies([fleet[0].model_copy(update={"client": "sdk"})], proxies)
    check_proxies([Backend(name="near", base_url="http://gpu.internal:8000/v1")], proxies)


def test_openai_base_url_is_the_last_fallback_for_backends():
    env = {"OPENAI_BASE_URL": "http://gpu:8000/v1"}
    (backend,) = load_settings({}, environ=env).backends
    assert backend.base_url == "http://gpu:8000/v1"
    (chosen,) = load_settings({}, environ=env | {"FANOUT_BACKENDS": "http://other:1/v1"}).backends
    assert chosen.base_url == "http://other:1/v1"
    assert load_settings({}, environ={}).backends == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--header", "no-colon"], "--header 'no-colon': expected NAME:VALUE"),
        (["--extra-body", "{bad"], "--extra-body: not JSON"),
        (["--extra-body", "[1]"], "--extra-body: expected a JSON object"),
        (["--client", "curl"], "invalid choice: 'curl'"),
    ],
)
def test_bad_request_flags_are_one_line_and_exit_2(args, message, capsys):
    assert main(["bench", "--rate", "1", "--backend", "http://127.0.0.1:9/v1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("fanout ")
