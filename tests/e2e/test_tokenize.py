"""llama-server's and vLLM's /tokenize and /detokenize against tempo9 serving SmolLM2: text and chat
messages to ids (the same count the chat endpoint reports as prompt tokens), pieces that spell the
text, ids back to text, and bad input as a 400 naming the field."""
import json
import urllib.error
import urllib.request


def post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_text_round_trip_and_pieces(server):
    text = "Héllo, wörld: 12 tokens? ✓"
    code, t = post(server, "/tokenize", {"content": text})
    assert code == 200 and t["count"] == len(t["tokens"]) > 3 and t["max_model_len"] > 0
    code, d = post(server, "/detokenize", {"tokens": t["tokens"]})
    assert code == 200 and d["content"] == text and d["prompt"] == text
    code, p = post(server, "/tokenize", {"content": text, "with_pieces": True})
    assert [x["id"] for x in p["tokens"]] == t["tokens"]
    spelled = b"".join(bytes(x["piece"]) if isinstance(x["piece"], list) else x["piece"].encode()
                       for x in p["tokens"])
    assert spelled.decode() == text
    code, v = post(server, "/tokenize", {"prompt": text, "add_special_tokens": False})  # vLLM's form
    assert code == 200 and v["tokens"] == t["tokens"]
    # A control token's text is that token, or plain text with parse_special false.
    code, c = post(server, "/tokenize", {"content": "<|im_start|>"})
    assert len(c["tokens"]) == 1
    code, c = post(server, "/tokenize", {"content": "<|im_start|>", "parse_special": False})
    assert len(c["tokens"]) > 1


def test_messages_count_equals_the_chat_prompt(server):
    messages = [{"role": "system", "content": "You are brief."},
                {"role": "user", "content": "Name a colour."}]
    code, t = post(server, "/tokenize", {"messages": messages})
    assert code == 200
    code, c = post(server, "/v1/chat/completions", {"model": "m", "messages": messages, "max_tokens": 1})
    assert code == 200 and c["usage"]["prompt_tokens"] == t["count"]


def test_bad_input_names_the_field(server):
    code, e = post(server, "/detokenize", {"tokens": [1, -5]})
    assert code == 400 and e["error"]["param"] == "tokens[1]"
    code, e = post(server, "/detokenize", {})
    assert code == 400 and e["error"]["param"] == "tokens"
    code, e = post(server, "/tokenize", {})
    assert code == 400 and "content" in e["error"]["message"]
    code, e = post(server, "/tokenize", {"messages": [{"role": "alien", "content": "x"}]})
    assert code == 400 and e["error"]["param"] == "messages[0].role"
