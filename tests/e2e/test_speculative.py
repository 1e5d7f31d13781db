"""Speculative decoding (`serve --spec-draft 4`: prompt-lookup drafts verified greedily) through the
OpenAI SDK: a reply that copies from the prompt is byte-identical to the plain server's, and the
server's /metrics show that drafts were computed and kept."""

import openai
import pytest

from live_server import SMOLLM2, Server, metric

CODE = "def area(w, h):\n    return w * h\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"
MSGS = [{"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Repeat this code exactly, nothing else:\n\n" + CODE}]


@pytest.fixture(scope="module")
def spec_server():
    s = Server(SMOLLM2, "--spec-draft", "4")
    yield s
    s.stop()


def test_speculative_replies_equal_plain_ones(server, spec_server):
    outs = []
    for s in (server, spec_server):
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x")
        r = c.chat.completions.create(model="m", messages=MSGS, max_tokens=48, temperature=0)
        outs.append(r.choices[0].message.content)
    assert outs[0] == outs[1]
    assert "perimeter" in outs[1]  # the model does copy, so drafts had something to match
    assert metric(spec_server.url, "tempo9_accepted_draft_tokens_total") > 0
    assert metric(server.url, "tempo9_draft_tokens_total") == 0
