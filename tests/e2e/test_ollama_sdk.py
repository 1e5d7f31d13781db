"""The official `ollama` SDK against tempo9 serving SmolLM2."""
import ollama
import pytest

from live_server import CAPITAL_QUESTION


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server.url)


def test_chat_non_streaming(client):
    r = client.chat(model="smollm2", messages=[{"role": "system", "content": "You are a helpful assistant."},
                                               {"role": "user", "content": CAPITAL_QUESTION}],
                    options={"temperature": 0, "num_predict": 24}, stream=False)
    assert r.message.role == "assistant" and "Paris" in r.message.content
    assert r.done and r.done_reason in ("stop", "length")
    assert r.prompt_eval_count > 10 and 0 < r.eval_count <= 24


def test_chat_streaming_equals_non_streaming(client):
    kw = dict(model="m", messages=[{"role": "user", "content": "Tell me a fact."}],
              options={"temperature": 0, "num_predict": 12})
    whole = client.chat(stream=False, **kw).message.content
    parts = list(client.chat(stream=True, **kw))
    assert "".join(p.message.content for p in parts) == whole
    assert parts[-1].done and not any(p.done for p in parts[:-1])


def test_generate(client):
    r = client.generate(model="m", prompt="The capital of France is", raw=True,
                        options={"temperature": 0, "num_predict": 4, "stop": ["."]})
    assert "Paris" in r.response


def test_list_show_ps_version(client):
    models = client.list().models
    assert [m.model for m in models] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert models[0].details.family == "llama" and models[0].details.quantization_level == "Q4_1"
    show = client.show("SmolLM2-135M-Instruct.Q4_1")
    assert "completion" in show.capabilities and "im_start" in show.template
    assert [m.model for m in client.ps().models] == ["SmolLM2-135M-Instruct.Q4_1"]


def test_errors_are_sdk_exceptions(client):
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="m", messages=[{"role": "alien", "content": "hi"}], stream=False)
    assert e.value.status_code == 400 and "messages[0].role" in e.value.error
