"""The official `anthropic` SDK against tempo9 serving SmolLM2.

This SDK version has no `temperature` argument (sampling is the server's choice); greedy decoding
is asked for through extra_body, which the server reads like any Messages API field."""
import anthropic
import pytest

from live_server import CAPITAL_QUESTION


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused")


def test_messages_non_streaming(client):
    r = client.messages.create(model="claude-test-model", max_tokens=24, extra_body={"temperature": 0},
                               system="You are a helpful assistant.",
                               messages=[{"role": "user", "content": CAPITAL_QUESTION}])
    assert r.type == "message" and r.role == "assistant"
    assert r.model == "claude-test-model"
    assert r.content[0].type == "text" and "Paris" in r.content[0].text
    assert r.stop_reason in ("end_turn", "max_tokens")
    assert r.usage.input_tokens > 10 and 0 < r.usage.output_tokens <= 24


def test_streaming_equals_non_streaming(client):
    kw = dict(model="claude-x", max_tokens=16, extra_body={"temperature": 0},
              messages=[{"role": "user", "content": [{"type": "text", "text": "Tell me a fact."}]}])
    whole = client.messages.create(**kw).content[0].text
    with client.messages.stream(**kw) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == whole
    assert final.content[0].text == whole
    assert final.usage.output_tokens > 0


def test_cache_read_tokens_on_repeat(client):
    system = [{"type": "text", "text": "You are a careful assistant. " * 40, "cache_control": {"type": "ephemeral"}}]
    kw = dict(model="c", max_tokens=2, extra_body={"temperature": 0}, system=system,
              messages=[{"role": "user", "content": "Say OK."}])
    client.messages.create(**kw)
    r = client.messages.create(**kw)
    assert r.usage.cache_read_input_tokens > 100
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens > r.usage.cache_read_input_tokens


def test_stop_sequences(client):
    r = client.messages.create(model="c", max_tokens=32, extra_body={"temperature": 0}, stop_sequences=["Paris"],
                               system="You are a helpful assistant.",
                               messages=[{"role": "user", "content": CAPITAL_QUESTION}])
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == "Paris"
    assert "Paris" not in r.content[0].text


def test_models_list_and_retrieve(client):
    page = client.models.list()
    assert [m.id for m in page.data] == ["SmolLM2-135M-Instruct.Q4_1"]
    m = page.data[0]
    assert m.type == "model" and m.display_name == m.id and m.created_at.year >= 2026
    assert client.models.retrieve(m.id).id == m.id


def test_count_tokens(client):
    r = client.messages.count_tokens(model="c", messages=[{"role": "user", "content": "Hello there"}])
    assert 5 < r.input_tokens < 60


def test_tool_use_history_is_accepted(client):
    """A Claude-Code-shaped conversation: tools, a tool_use turn and its tool_result."""
    r = client.messages.create(
        model="c", max_tokens=8, extra_body={"temperature": 0},
        tools=[{"name": "read_file", "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}],
        messages=[{"role": "user", "content": "Read README.md"},
                  {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                                                    {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                                     "input": {"path": "README.md"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                "content": "# Tempo9"}]}])
    assert r.usage.output_tokens > 0


def test_errors_are_sdk_exceptions(client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="c", max_tokens=4, messages=[{"role": "robot", "content": "hi"}])
    assert e.value.status_code == 400
    assert "messages[0].role" in str(e.value)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="c", max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
