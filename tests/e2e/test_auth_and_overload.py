"""--api-key (Bearer and x-api-key) and overload (503 + Retry-After), each in the protocol's own
error shape, raised as the SDKs' own exception types."""
import anthropic
import ollama
import openai
import pytest

from live_server import SMOLLM2, Server


@pytest.fixture(scope="module")
def keyed():
    s = Server(SMOLLM2, "--api-key", "sekret")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def overloaded():
    s = Server(SMOLLM2, "--max-queued", "0")  # every generation finds the queue "full"
    yield s
    s.stop()


MSG = [{"role": "user", "content": "hi"}]


def test_api_key_required(keyed):
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed.url + "/v1", api_key="wrong").chat.completions.create(model="m", messages=MSG)
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=keyed.url, api_key="wrong").messages.create(model="m", max_tokens=2, messages=MSG)
    with pytest.raises(ollama.ResponseError) as e:
        ollama.Client(host=keyed.url).chat(model="m", messages=MSG, stream=False)
    assert e.value.status_code == 401
    # The right key works, as Bearer (OpenAI) and as x-api-key (Anthropic).
    r = openai.OpenAI(base_url=keyed.url + "/v1", api_key="sekret").chat.completions.create(
        model="m", messages=MSG, max_tokens=2)
    assert r.usage.completion_tokens >= 1
    r = anthropic.Anthropic(base_url=keyed.url, api_key="sekret").messages.create(model="m", max_tokens=2, messages=MSG)
    assert r.usage.output_tokens >= 1
    assert keyed.healthy()  # /health needs no key


def test_overload_is_503_with_retry_after(overloaded):
    c = openai.OpenAI(base_url=overloaded.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as e:
        c.chat.completions.create(model="m", messages=MSG, max_tokens=2)
    assert e.value.status_code == 503
    assert e.value.response.headers["retry-after"] == "1"
    a = anthropic.Anthropic(base_url=overloaded.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as e:
        a.messages.create(model="m", max_tokens=2, messages=MSG)
    assert e.value.status_code == 503 and e.value.body["error"]["type"] == "overloaded_error"
