"""Structured output through the official SDKs: OpenAI's response_format (json_schema, json_object,
the SDK's own pydantic parse) and Ollama's format, on SmolLM2 (49k vocabulary) and Qwen2.5-Coder
(151k). Each reply must parse and match its schema exactly (declared types, required keys, no
extra keys), end with finish_reason "stop" when the value closes, and leave an unconstrained
request beside it byte-identical to the same request alone."""
import concurrent.futures
import json
from typing import Literal

import ollama
import openai
import pydantic
import pytest

from live_server import metric

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0},
        "phone": {"type": "string", "maxLength": 16},  # bounded: a 135M model loops in a free string
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age", "phone", "tags"],
    "additionalProperties": False,
}
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in JSON."}]
ASK = [{"role": "user", "content": "Invent a person. Reply in JSON with name, age, phone number and tags."}]


def check_person(obj):
    assert list(obj) == ["name", "age", "phone", "tags"], obj  # declared order, nothing extra
    assert isinstance(obj["name"], str) and len(obj["name"]) <= 24
    assert isinstance(obj["age"], int) and not isinstance(obj["age"], bool) and obj["age"] >= 0
    assert isinstance(obj["phone"], str)  # a phone number stays a string
    assert isinstance(obj["tags"], list) and len(obj["tags"]) <= 3
    assert all(isinstance(t, str) for t in obj["tags"])


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def schema_format(schema, name="out"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def test_json_schema_reply_matches_the_schema(client, server):
    before = metric(server.url, "tempo9_accepted_forced_tokens_total")
    r = client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=120,
                                       response_format=schema_format(PERSON))
    c = r.choices[0]
    check_person(json.loads(c.message.content))
    assert c.finish_reason == "stop"  # the object closed: the request ended there
    # The keys' rests are forced: proposed as drafts, and the model's own choice confirms them.
    assert metric(server.url, "tempo9_accepted_forced_tokens_total") > before


def test_sampled_replies_match_the_schema(client):
    for seed in range(4):
        r = client.chat.completions.create(model="m", messages=ASK, temperature=1.0, top_p=0.95,
                                           seed=seed, max_tokens=120,
                                           response_format=schema_format(PERSON))
        if r.choices[0].finish_reason == "stop":  # a sampled string may run to max_tokens
            check_person(json.loads(r.choices[0].message.content))
        else:
            assert r.choices[0].finish_reason == "length"


def test_streamed_reply_equals_the_whole_one(client):
    kw = dict(model="m", messages=ASK, temperature=0, max_tokens=120, response_format=schema_format(PERSON))
    whole = client.chat.completions.create(**kw).choices[0].message.content
    text = "".join(ch.choices[0].delta.content or ""
                   for ch in client.chat.completions.create(stream=True, **kw) if ch.choices)
    assert text == whole


class Weather(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=16)  # bounded: a 135M model may loop in a free string
    unit: Literal["celsius", "fahrenheit"]
    days: list[int] = pydantic.Field(max_length=3)


def test_sdk_parse_with_a_pydantic_model(client):
    r = client.chat.completions.parse(
        model="m", temperature=0, max_tokens=100, response_format=Weather,
        messages=[{"role": "user", "content": "Weather forecast for Paris as JSON."}])
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Weather)
    assert parsed.unit in ("celsius", "fahrenheit") and len(parsed.days) <= 3
    assert r.choices[0].finish_reason == "stop"


def test_json_object_reply_is_an_object(client):
    r = client.chat.completions.create(model="m", temperature=0, max_tokens=200,
                                       response_format={"type": "json_object"}, messages=CAPITAL)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_enum_and_nested_references(client):
    schema = {"$defs": {"step": {"type": "object", "properties": {"op": {"enum": ["add", "mul"]},
                                                                 "arg": {"type": "number"}},
                                 "required": ["op", "arg"]}},
              "type": "object", "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/step"},
                                                         "minItems": 1, "maxItems": 2}},
              "required": ["steps"]}
    r = client.chat.completions.create(model="m", temperature=0, max_tokens=80, response_format=schema_format(schema),
                                       messages=[{"role": "user", "content": "Plan two arithmetic steps."}])
    obj = json.loads(r.choices[0].message.content)
    assert 1 <= len(obj["steps"]) <= 2
    for s in obj["steps"]:
        assert list(s) == ["op", "arg"] and s["op"] in ("add", "mul")
        assert isinstance(s["arg"], (int, float)) and not isinstance(s["arg"], bool)


def test_unconstrained_neighbour_is_unchanged(client):
    plain = dict(model="m", messages=[{"role": "user", "content": "Tell me about the sea."}], temperature=0, max_tokens=40)
    alone = client.chat.completions.create(**plain).choices[0].message.content
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(client.chat.completions.create, model="m", messages=ASK, temperature=0, max_tokens=120,
                            response_format=schema_format(PERSON)) for _ in range(3)]
        side = pool.submit(client.chat.completions.create, **plain)
        replies = [f.result() for f in futs]
    assert side.result().choices[0].message.content == alone
    texts = {r.choices[0].message.content for r in replies}
    assert len(texts) == 1  # greedy constrained replies agree with each other
    check_person(json.loads(texts.pop()))


@pytest.mark.parametrize("response_format, message", [
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a+"}}},
     "response_format.json_schema.schema.pattern: is not supported"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}},
     "response_format.json_schema.schema.type: 'objekt' is not a JSON Schema type"),
    ({"type": "json_schema", "json_schema": {"name": "x"}}, "response_format.json_schema.schema: is required"),
    ({"type": "json_schema"}, "response_format.json_schema: is required when type is json_schema"),
    ({"type": "yaml"}, "response_format.type: must be text, json_object or json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "https://x.org/s.json"}}},
     "response_format.json_schema.schema.$ref: only references inside the schema"),
])
def test_bad_formats_are_400s_naming_the_field(client, response_format, message):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, max_tokens=4, response_format=response_format)
    assert e.value.status_code == 400
    assert e.value.body["message"].startswith(message), e.value.body


def test_ollama_format_schema_and_json(server):
    c = ollama.Client(host=server.url)
    r = c.chat(model="m", messages=ASK, format=PERSON, options={"temperature": 0, "num_predict": 120}, stream=False)
    check_person(json.loads(r.message.content))
    assert r.done_reason == "stop"
    g = c.generate(model="m", prompt=CAPITAL[0]["content"], format="json",
                   options={"temperature": 0, "num_predict": 200}, stream=False)
    assert g.done_reason == "stop" and isinstance(json.loads(g.response), dict)
    with pytest.raises(ollama.ResponseError) as e:
        c.chat(model="m", messages=ASK, format={"type": "string", "pattern": "x"}, stream=False)
    assert e.value.status_code == 400 and "format.pattern: is not supported" in str(e.value)


def test_qwen_large_vocabulary(qwen_server):
    """Qwen2.5-Coder: a 151k-token vocabulary with multi-byte and user-defined tokens."""
    c = openai.OpenAI(base_url=qwen_server.url + "/v1", api_key="unused")
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}, "qty": {"type": "integer"}},
              "required": ["order_id", "qty"], "additionalProperties": False}
    r = c.chat.completions.create(model="m", temperature=0, max_tokens=40, response_format=schema_format(schema),
                                  messages=[{"role": "user", "content": "Order 00123, quantity five. As JSON."}])
    obj = json.loads(r.choices[0].message.content)
    assert list(obj) == ["order_id", "qty"]
    assert isinstance(obj["order_id"], str) and isinstance(obj["qty"], int)
    assert r.choices[0].finish_reason == "stop"


ORDER_TOOL = {"type": "function", "function": {
    "name": "get_order_status", "description": "Shipping status of an order by its order number.",
    "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                   "required": ["order_number"]}}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city", "days"]}}}
HELLO = [{"role": "user", "content": "Hi! Tell me a short joke."}]


def test_tool_choice_required_forces_a_call(qwen_server):
    """Without the constraint the model answers a joke request in prose; with tool_choice
    required (Hermes dialect) the reply is a call with schema-typed arguments."""
    c = openai.OpenAI(base_url=qwen_server.url + "/v1", api_key="unused")
    kw = dict(model="m", messages=HELLO, tools=[ORDER_TOOL, WEATHER_TOOL], temperature=0, max_tokens=60)
    auto = c.chat.completions.create(**kw)
    assert auto.choices[0].finish_reason == "stop" and not auto.choices[0].message.tool_calls
    r = c.chat.completions.create(tool_choice="required", **kw)
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
    for call in r.choices[0].message.tool_calls:
        args = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert list(args) == ["city", "days"] and isinstance(args["days"], int)
        else:
            assert call.function.name == "get_order_status" and isinstance(args["order_number"], str)
    named = c.chat.completions.create(tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                      parallel_tool_calls=False, **kw)
    calls = named.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments)["days"], int)


def test_anthropic_tool_choice_any(qwen_server):
    import anthropic
    c = anthropic.Anthropic(base_url=qwen_server.url, api_key="unused")
    tool = {"name": "get_weather", "description": "Weather forecast for a city.",
            "input_schema": WEATHER_TOOL["function"]["parameters"]}
    r = c.messages.create(model="m", max_tokens=60, extra_body={"temperature": 0}, messages=HELLO, tools=[tool],
                          tool_choice={"type": "any"})
    assert r.stop_reason == "tool_use"
    uses = [b for b in r.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather" and isinstance(uses[0].input["days"], int)


def test_gbnf_grammar_field(client):
    """llama-server's `grammar` field: a GBNF grammar over the whole output."""
    gbnf = 'root ::= answer "."\nanswer ::= "yes" | "no" | "maybe " [0-9]{1,2} "%"'
    r = client.chat.completions.create(model="m", messages=CAPITAL, temperature=0, max_tokens=20,
                                       extra_body={"grammar": gbnf})
    text = r.choices[0].message.content
    assert text in ("yes.", "no.") or (text.startswith("maybe ") and text.endswith("%.")), text
    assert r.choices[0].finish_reason == "stop"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=CAPITAL, max_tokens=4,
                                       extra_body={"grammar": 'root ::= "abc'})
    assert e.value.body["message"] == "grammar: line 1, column 14: unterminated string literal"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=CAPITAL, max_tokens=4, response_format={"type": "json_object"},
                                       extra_body={"grammar": 'root ::= "a"'})
    assert e.value.body["message"].startswith("grammar: give either grammar or response_format")
