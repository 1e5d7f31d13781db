"""A corpus of malformed requests (>= 200) against all three protocols: each must get a clean 4xx
in the protocol's own error shape, and the server must stay up and keep serving."""
import json
import urllib.error
import urllib.request

import pytest

OPENAI_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
ANTHROPIC = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
OLLAMA_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False,
               "options": {"num_predict": 2}}
OLLAMA_GEN = {"model": "m", "prompt": "hi", "stream": False, "options": {"num_predict": 2}}
COMPLETION = {"model": "m", "prompt": "hi", "max_tokens": 2}
LLAMA_COMPLETION = {"prompt": "hi", "n_predict": 2, "temperature": 0}  # llama-server's /completion
RESPONSES = {"model": "m", "max_output_tokens": 2, "store": False,  # OpenAI's Responses API
             "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                       {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                       {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
             "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
             "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}}
OPENAI_SCHEMA = dict(OPENAI_CHAT, response_format={"type": "json_schema", "json_schema": {
    "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}})
OLLAMA_FORMAT = dict(OLLAMA_CHAT, format={"type": "object", "properties": {"a": {"type": "string"}}})

BAD_VALUES = [None.__class__, "str", 1.5, -3, [], {}, True, [1, 2], {"a": 1}, "x" * 3]


def mutate(base: dict, key_path: list, value):
    body = json.loads(json.dumps(base))
    obj = body
    for k in key_path[:-1]:
        obj = obj[k]
    if value is None.__class__:
        if isinstance(obj, dict):
            obj.pop(key_path[-1], None)
    else:
        obj[key_path[-1]] = value
    return body


def cases():
    out = []
    raw_bodies = [b"", b"{", b"null", b"[]", b"42", b'"text"', b"{\"model\": }", b"\xff\xfe", b"{\"a\":1}}"]
    for path in ["/v1/chat/completions", "/v1/completions", "/v1/messages", "/api/chat", "/api/generate",
                 "/completion", "/tokenize", "/detokenize", "/v1/responses"]:
        for raw in raw_bodies:
            out.append((path, raw))
    fields = {
        "/v1/chat/completions": (OPENAI_CHAT, [["messages"], ["messages", 0, "role"], ["messages", 0, "content"],
                                               ["max_tokens"], ["temperature"], ["top_p"], ["stream"], ["n"],
                                               ["stop"], ["logit_bias"], ["tools"], ["tool_choice"], ["seed"],
                                               ["presence_penalty"]]),
        "/v1/completions": (COMPLETION, [["prompt"], ["max_tokens"], ["temperature"], ["stop"], ["top_p"]]),
        "/v1/messages": (ANTHROPIC, [["messages"], ["max_tokens"], ["messages", 0, "role"],
                                     ["messages", 0, "content"], ["system"], ["stop_sequences"], ["tools"],
                                     ["thinking"], ["tool_choice"]]),
        "/api/chat": (OLLAMA_CHAT, [["messages", 0, "role"], ["messages"], ["options"], ["stream"], ["think"]]),
        "/api/generate": (OLLAMA_GEN, [["prompt"], ["options"], ["raw"], ["stream"], ["logprobs"],
                                       ["top_logprobs"]]),
        "/v1/responses": (RESPONSES, [["input"], ["input", 0, "role"], ["input", 0, "content"],
                                      ["input", 0, "content", 0, "type"], ["input", 1, "call_id"],
                                      ["input", 1, "arguments"], ["input", 2, "output"], ["input", 2, "type"],
                                      ["tools"], ["tools", 0, "type"], ["tools", 0, "name"], ["tool_choice"],
                                      ["text"], ["text", "format"], ["text", "format", "type"],
                                      ["text", "format", "schema"], ["max_output_tokens"], ["instructions"],
                                      ["reasoning"], ["previous_response_id"], ["stream"], ["temperature"]]),
        "/completion": (LLAMA_COMPLETION, [["prompt"], ["n_predict"], ["temperature"], ["stop"],
                                           ["n_probs"], ["logit_bias"], ["grammar"], ["json_schema"],
                                           ["stream"], ["return_tokens"]]),
    }
    structured = [  # structured output: the format, and parts of the schema inside it
        ("/v1/chat/completions", OPENAI_SCHEMA, [["response_format"], ["response_format", "type"],
                                                 ["response_format", "json_schema"],
                                                 ["response_format", "json_schema", "schema"],
                                                 ["response_format", "json_schema", "schema", "properties"],
                                                 ["response_format", "json_schema", "schema", "required"],
                                                 ["response_format", "json_schema", "schema", "properties", "a"],
                                                 ["response_format", "json_schema", "schema", "properties", "a",
                                                  "type"]]),
        ("/api/chat", OLLAMA_FORMAT, [["format"], ["format", "type"], ["format", "properties", "a"]]),
    ]
    for path, base, keys in [(p, b, k) for p, (b, k) in fields.items()] + structured:
        for key in keys:
            for v in BAD_VALUES:
                body = mutate(base, key, v)
                if body == base:
                    continue
                out.append((path, json.dumps(body).encode()))
    return out


# Some mutations are valid requests (e.g. deleting an optional field, or a string where a string
# is fine): those must succeed. Everything else must be a 4xx.
def post(url, body: bytes):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def error_shape_ok(path: str, status: int, body: bytes) -> bool:
    j = json.loads(body)
    if path.startswith("/api/"):
        return isinstance(j.get("error"), str) and j["error"]
    if path.startswith("/v1/messages"):
        return j.get("type") == "error" and j["error"]["type"] and j["error"]["message"]
    return isinstance(j.get("error"), dict) and j["error"]["message"] and j["error"]["type"]


def test_corpus_size():
    assert len(cases()) >= 200


def test_malformed_requests(server):
    n_4xx = n_ok = 0
    failures = []
    for path, body in cases():
        status, resp = post(server.url + path, body)
        if 200 <= status < 300:
            n_ok += 1
            continue
        if not (400 <= status < 500) or not error_shape_ok(path, status, resp):
            failures.append((path, body[:120], status, resp[:200]))
        n_4xx += 1
    print(f"malformed corpus: {n_4xx} rejected with 4xx, {n_ok} were valid requests, {len(failures)} bad")
    assert not failures, failures[:20]
    assert n_4xx >= 200
    assert server.healthy()
    status, _ = post(server.url + "/v1/chat/completions", json.dumps(OPENAI_CHAT).encode())
    assert status == 200


def test_deeply_nested_bodies_are_400s(server):
    """200,000 nested brackets anywhere in a body (a schema, a tool, an unknown field) are a 400
    naming the limit, never a stack overflow in whatever walks the document afterwards."""
    deep = "[" * 200000 + "]" * 200000
    bodies = {
        "/v1/chat/completions": '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,'
                                '"response_format":{"type":"json_schema","json_schema":{"name":"x",'
                                '"schema":{"enum":[' + deep + ']}}}}',
        "/v1/messages": '{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"}],'
                        '"tools":[{"name":"t","input_schema":' + deep + '}]}',
        "/api/chat": '{"model":"m","messages":[{"role":"user","content":"hi"}],"format":{"a":' + deep + '}}',
        "/v1/completions": '{"prompt":"hi","x":' + deep + '}',
    }
    for path, body in bodies.items():
        status, resp = post(server.url + path, body.encode())
        assert status == 400 and error_shape_ok(path, status, resp), (path, status, resp[:200])
        assert b"nested deeper than 128 levels" in resp
    ok = '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"x":' + "[" * 100 + "]" * 100 + "}"
    assert post(server.url + "/v1/chat/completions", ok.encode())[0] == 200
    assert server.healthy()


def test_oversized_body_and_unknown_route(server):
    status, body = post(server.url + "/v1/messages", b"{" + b" " * (33 << 20) + b"}")
    assert status == 413 and json.loads(body)["error"]["type"] == "request_too_large"
    status, body = post(server.url + "/v1/nothing", b"{}")
    assert status == 404 and "error" in json.loads(body)
    assert server.healthy()
