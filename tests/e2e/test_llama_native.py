"""llama-server's own /completion and /props against tempo9 serving SmolLM2 (clients written for
llama.cpp: its web UI, editor plugins): the reply's fields, a stop word, token probabilities, the
SSE stream, bad input as a 400 naming the field."""
import json
import urllib.error
import urllib.request

PROMPT = "The capital of France is"


def post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_completion_fields_and_probabilities(server):
    code, text = post(server, "/completion", {"prompt": PROMPT, "n_predict": 6, "temperature": 0,
                                              "n_probs": 3, "return_tokens": True})
    assert code == 200
    r = json.loads(text)
    assert r["stop"] is True and r["stop_type"] == "limit" and r["tokens_predicted"] == 6
    assert r["tokens_evaluated"] == len(json.loads(post(server, "/tokenize", {"prompt": PROMPT})[1])["tokens"])
    assert len(r["tokens"]) == 6 and r["timings"]["predicted_n"] == 6 and r["prompt"] == PROMPT
    # The same greedy text as the OpenAI completions endpoint (one engine underneath).
    code, o = post(server, "/v1/completions", {"model": "m", "prompt": PROMPT, "max_tokens": 6, "temperature": 0})
    assert json.loads(o)["choices"][0]["text"] == r["content"]
    probs = r["completion_probabilities"]
    assert [p["id"] for p in probs] == r["tokens"] and "".join(p["token"] for p in probs) == r["content"]
    for p in probs:
        assert len(p["top_logprobs"]) == 3 and p["top_logprobs"][0]["id"] == p["id"]  # greedy
        assert p["logprob"] == p["top_logprobs"][0]["logprob"] <= 0


def test_stop_word_and_stream(server):
    body = {"prompt": PROMPT, "n_predict": 16, "temperature": 0, "stop": ["."]}
    code, text = post(server, "/completion", body)
    whole = json.loads(text)
    assert whole["stop_type"] == "word" and whole["stopping_word"] == "." and "." not in whole["content"]
    code, text = post(server, "/completion", dict(body, stream=True))
    assert code == 200 and "[DONE]" not in text
    events = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]
    assert all(e["stop"] is False for e in events[:-1]) and events[-1]["stop"] is True
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["stop_type"] == "word"


def test_props_and_bad_input(server):
    with urllib.request.urlopen(server.url + "/props", timeout=30) as r:
        props = json.loads(r.read())
    assert props["default_generation_settings"]["n_ctx"] > 0 and "im_start" in props["chat_template"]
    code, text = post(server, "/completion", {"n_predict": 4})
    assert code == 400 and json.loads(text)["error"]["param"] == "prompt"
    code, text = post(server, "/completion", {"prompt": [1, -3], "n_predict": 4})
    assert code == 400 and json.loads(text)["error"]["param"] == "prompt[1]"
    code, text = post(server, "/completion", {"prompt": "hi", "n_predict": 0})
    assert code == 400 and json.loads(text)["error"]["param"] == "n_predict"
