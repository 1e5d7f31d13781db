"""The official `openai` SDK against tempo9 serving SmolLM2 (greedy, so outputs are comparable)."""
import openai
import pytest

from live_server import CAPITAL_QUESTION

MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": CAPITAL_QUESTION}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def test_chat_non_streaming(client):
    r = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=24, temperature=0)
    assert r.object == "chat.completion"
    assert r.model == "gpt-4o"  # any name is served and echoed back, like llama-server
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert "Paris" in c.message.content
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 10 and 0 < u.completion_tokens <= 24
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_streaming_equals_non_streaming(client):
    kw = dict(model="m", messages=MESSAGES, max_tokens=16, temperature=0)
    whole = client.chat.completions.create(**kw).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_prefix_cache_reported_in_usage(client):
    long_system = "You are a meticulous assistant. " * 40
    msgs = [{"role": "system", "content": long_system}, {"role": "user", "content": "Say OK."}]
    client.chat.completions.create(model="m", messages=msgs, max_tokens=2, temperature=0)
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=2, temperature=0)
    cached = r.usage.prompt_tokens_details.cached_tokens
    assert cached >= r.usage.prompt_tokens - 16, (cached, r.usage.prompt_tokens)  # all full blocks


def test_stop_strings_and_seeded_sampling(client):
    r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=16,
                                  temperature=0, stop=["."])
    assert "." not in r.choices[0].text and "Paris" in r.choices[0].text
    assert r.choices[0].finish_reason == "stop"
    kw = dict(model="m", messages=MESSAGES, max_tokens=12, temperature=1.0, seed=1234)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b


def test_ignore_eos_generates_to_max_tokens(client):
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say OK."}]
    # The short answer ends at the end-of-turn token well before 48 tokens ...
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=48, temperature=0)
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens < 48
    # ... and with llama-server's ignore_eos it runs to exactly max_tokens.
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=48, temperature=0,
                                       extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 48


def test_logprobs(client):
    r = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == r.usage.completion_tokens
    for t in lp:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        assert t.top_logprobs[0].logprob >= t.logprob - 1e-4  # greedy: the chosen token is the best


def test_streamed_logprobs_equal_the_whole_reply(client):
    """Every token's entry arrives in the stream, also a token that adds no text on its own (it rides
    on the next chunk): the same entries, in order, as the non-streaming reply."""
    kw = dict(model="m", messages=MESSAGES, max_tokens=12, temperature=0, logprobs=True, top_logprobs=2)
    whole = client.chat.completions.create(**kw)
    streamed = []
    for chunk in client.chat.completions.create(stream=True, **kw):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed += chunk.choices[0].logprobs.content
    want = whole.choices[0].logprobs.content
    assert [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in streamed] == \
        [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in want]
    assert len(want) == whole.usage.completion_tokens


def test_completions_logprobs(client):
    """The legacy completions API's integer logprobs: tokens spelling the text, their logprobs, one
    {token: logprob} object of at most N alternatives each (greedy: the token among them, at its own
    logprob), byte offsets into the text; streamed chunks carry the same, offsets continuing."""
    kw = dict(model="m", prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=3)
    r = client.completions.create(**kw)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text and len(lp.tokens) == r.usage.completion_tokens
    offsets = [0]
    for tok, l, alts in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert l <= 0 and 1 <= len(alts) <= 3 and alts[tok] == l and max(alts.values()) == l
        offsets.append(offsets[-1] + len(tok.encode()))
    assert lp.text_offset == offsets[:-1]
    streamed = [c.choices[0].logprobs for c in client.completions.create(stream=True, **kw)
                if c.choices and c.choices[0].logprobs]
    assert [t for s in streamed for t in s.tokens] == lp.tokens
    assert [o for s in streamed for o in s.text_offset] == lp.text_offset
    assert client.completions.create(**dict(kw, logprobs=None)).choices[0].logprobs is None


def test_required_tool_call_the_template_cannot_format_is_a_400(client):
    """SmolLM2's template has no tool-call format: tool_choice "required" (which the server could
    not enforce) is a 400 naming tool_choice, not prose; "auto" still answers."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=3, tools=tools,
                                       tool_choice="required")
    assert e.value.body["param"] == "tool_choice" and "no tool-call format" in e.value.body["message"]
    r = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=3, tools=tools)
    assert r.choices[0].message.content


def test_models_list(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["SmolLM2-135M-Instruct.Q4_1"]
    assert client.models.retrieve("SmolLM2-135M-Instruct.Q4_1").id == ids[0]


@pytest.mark.parametrize("kwargs,param", [
    (dict(messages=[{"role": "wizard", "content": "hi"}]), "messages[0].role"),
    (dict(messages=[]), "messages"),
    (dict(messages=MESSAGES, temperature=-1), "temperature"),
    (dict(messages=MESSAGES, n=2), "n"),
    (dict(messages=MESSAGES, max_tokens=0), "max_tokens"),
])
def test_errors_are_sdk_exceptions(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", **kwargs)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param


def test_prompt_longer_than_context(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="hello " * 9000, max_tokens=4)
    assert "8192" in str(e.value)
