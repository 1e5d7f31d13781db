"""The OpenAI Responses API (POST /v1/responses) through the official `openai` SDK: text in and
out (SmolLM2, greedy), streamed events equal to the whole response and accumulated by the SDK's
own stream helper, structured output, a stored conversation continued by previous_response_id,
errors in OpenAI's shape naming the field; function calls with the tool-capable Qwen2.5-Coder
(a declared string argument stays a string), and the call's output sent back as an input item."""
import json

import openai
import pytest

from live_server import CAPITAL_QUESTION


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def test_text_response(client):
    r = client.responses.create(model="gpt-5", input=CAPITAL_QUESTION, max_output_tokens=24,
                                temperature=0, instructions="You are a helpful assistant.")
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.model == "gpt-5"
    assert r.status in ("completed", "incomplete")
    assert [o.type for o in r.output] == ["message"]
    assert r.output[0].role == "assistant" and r.output[0].content[0].type == "output_text"
    assert "Paris" in r.output_text
    assert r.instructions == "You are a helpful assistant."
    u = r.usage
    assert u.input_tokens > 10 and 0 < u.output_tokens <= 24
    assert u.total_tokens == u.input_tokens + u.output_tokens


def test_incomplete_at_max_output_tokens(client):
    r = client.responses.create(model="m", input="Count from 1 to 100.", max_output_tokens=4,
                                temperature=0)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 4
    assert r.output[0].status == "incomplete"


def test_stream_events_equal_the_whole_response(client):
    kw = dict(model="m", input=CAPITAL_QUESTION, max_output_tokens=16, temperature=0)
    whole = client.responses.create(**kw)
    events = list(client.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text
    assert [e.text for e in events if e.type == "response.output_text.done"] == [deltas]
    final = events[-1].response
    assert final.output_text == whole.output_text and final.usage.output_tokens > 0
    # Items open before their content and close after it, each once.
    assert types.index("response.output_item.added") < types.index("response.output_text.delta")
    assert types.count("response.output_item.added") == types.count("response.output_item.done")


def test_sdk_stream_helper_accumulates(client):
    with client.responses.stream(model="m", input=CAPITAL_QUESTION, max_output_tokens=16,
                                 temperature=0) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    whole = client.responses.create(model="m", input=CAPITAL_QUESTION, max_output_tokens=16,
                                    temperature=0)
    assert final.output_text == whole.output_text


def test_previous_response_id_continues_a_stored_conversation(client):
    first = client.responses.create(model="m", input="My name is Ada. Say hello.",
                                    max_output_tokens=12, temperature=0)
    assert client.responses.retrieve(first.id).output_text == first.output_text
    follow = client.responses.create(model="m", previous_response_id=first.id,
                                     input="What is my name?", max_output_tokens=12, temperature=0)
    # The same turn sent whole (input items: the first exchange, then the question) is the same
    # prompt, so greedy gives the same text, with the stored prefix read from the prefix cache.
    whole = client.responses.create(
        model="m", store=False, max_output_tokens=12, temperature=0,
        input=[{"role": "user", "content": "My name is Ada. Say hello."},
               {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": first.output_text}]},
               {"role": "user", "content": "What is my name?"}])
    assert follow.output_text == whole.output_text
    assert follow.previous_response_id == first.id
    assert whole.usage.input_tokens_details.cached_tokens > 0
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(whole.id)  # store: false keeps nothing
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", previous_response_id=first.id, input="Hi")


def test_json_schema_text_format(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
              "required": ["city"], "additionalProperties": False}
    r = client.responses.create(
        model="m", input=CAPITAL_QUESTION + " Answer in JSON.", max_output_tokens=40, temperature=0,
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}})
    assert r.status == "completed"
    assert set(json.loads(r.output_text)) == {"city"}


@pytest.mark.parametrize("body, param", [
    ({"model": "m"}, "input"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": "m", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
    ({"model": "m", "input": "hi", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"model": "m", "input": "hi", "reasoning": {"effort": "max"}}, "reasoning.effort"),
])
def test_bad_requests_name_the_field(client, body, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.post("/responses", body=body, cast_to=object)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param, e.value.body


def test_reasoning_effort(client):
    """OpenAI's reasoning effort reaches the template as enable_thinking (and reasoning_effort):
    accepted on both APIs, a value outside the list is a 400 naming the field."""
    r = client.responses.create(model="m", input="Hi", max_output_tokens=2, reasoning={"effort": "none"})
    assert r.reasoning.effort == "none" and r.status in ("completed", "incomplete")
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=2, reasoning_effort="low")
    assert c.choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=2, reasoning_effort="max")
    assert e.value.body["param"] == "reasoning_effort"


ORDER_TOOL = {
    "type": "function",
    "name": "get_order_status",
    "description": "Get the shipping status of a customer's order by its order number.",
    "parameters": {
        "type": "object",
        "properties": {"order_number": {"type": "string", "description": "The order number"}},
        "required": ["order_number"],
    },
}


def test_function_call_and_its_output(qwen_server):
    client = openai.OpenAI(base_url=qwen_server.url + "/v1", api_key="unused")
    question = {"role": "user", "content": "What is the status of my order 03106? Use the tool."}
    r = client.responses.create(model="qwen", input=[question], tools=[ORDER_TOOL],
                                max_output_tokens=80, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1, r.output
    call = calls[0]
    assert call.name == "get_order_status" and call.status == "completed"
    assert json.loads(call.arguments) == {"order_number": "03106"}  # a string, zero kept
    # Streamed: the same call, its arguments in deltas.
    events = list(client.responses.create(model="qwen", input=[question], tools=[ORDER_TOOL],
                                          max_output_tokens=80, temperature=0, stream=True))
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"order_number": "03106"}
    done = [e.item for e in events if e.type == "response.output_item.done"
            and e.item.type == "function_call"]
    assert [d.arguments for d in done] == [args]
    # The call and its output as input items: the model answers from the tool's result, as chat
    # completions does from the same history (the same prompt: greedy gives the same text). No
    # tools on this turn: a 1.5B model offered the tool again tends to call it again.
    result = json.dumps({"status": "shipped", "carrier": "DHL"})
    out = client.responses.create(
        model="qwen", max_output_tokens=40, temperature=0,
        input=[question,
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": result}])
    assert out.status in ("completed", "incomplete")
    assert "shipped" in out.output_text.lower(), out.output
    chat = client.chat.completions.create(
        model="qwen", max_tokens=40, temperature=0,
        messages=[question,
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": call.call_id, "type": "function",
                       "function": {"name": call.name, "arguments": call.arguments}}]},
                  {"role": "tool", "tool_call_id": call.call_id, "content": result}])
    assert out.output_text == chat.choices[0].message.content
