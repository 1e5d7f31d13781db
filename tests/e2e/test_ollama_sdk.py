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


def test_logprobs(client):
    """logprobs / top_logprobs (Ollama 0.12.11+): a top-level logprobs list, one entry per generated
    token whose texts spell the reply, each with its 3 best alternatives most likely first (greedy:
    the token is the best); streamed lines carry the same entries; out-of-range top_logprobs is a
    400 naming the field; top_logprobs without logprobs asks for nothing."""
    kw = dict(model="m", messages=[{"role": "user", "content": CAPITAL_QUESTION}],
              options={"temperature": 0, "num_predict": 10}, logprobs=True, top_logprobs=3)
    r = client.chat(stream=False, **kw)
    assert r.logprobs and "".join(t.token for t in r.logprobs) == r.message.content
    for t in r.logprobs:
        alts = [a.logprob for a in t.top_logprobs]
        assert t.logprob <= 0 and len(alts) == 3 and alts == sorted(alts, reverse=True)
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob
    streamed = [t for part in client.chat(stream=True, **kw) for t in (part.logprobs or [])]
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in r.logprobs]
    g = client.generate(model="m", prompt="The capital of France is", raw=True, logprobs=True,
                        options={"temperature": 0, "num_predict": 4})
    assert "".join(t.token for t in g.logprobs) == g.response and len(g.logprobs) == g.eval_count
    assert not g.logprobs[0].top_logprobs
    plain = client.chat(stream=False, **dict(kw, logprobs=False))
    assert plain.logprobs is None and plain.message.content == r.message.content
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(stream=False, **dict(kw, top_logprobs=21))
    assert e.value.status_code == 400 and "top_logprobs" in e.value.error


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
