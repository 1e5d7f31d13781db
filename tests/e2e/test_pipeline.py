"""Pipelined decode steps (`serve --pipeline on`: each decode step planned and enqueued while the
one before it computes, on the engine thread) through the OpenAI SDK: concurrent greedy replies
and a seeded sampled one, ended by the end-of-turn token or a stop string while the next step was
already enqueued, are byte-identical to the plain server's, and the server's /metrics show that steps were planned
ahead and the rows past those ends discarded."""
import concurrent.futures

import openai
import pytest

from live_server import SMOLLM2, Server, metric

ASKS = ["What is the capital of France?", "Name three primary colors.",
        "Write one sentence about the sea.", "Count from one to ten in words."]


@pytest.fixture(scope="module")
def piped_server():
    s = Server(SMOLLM2, "--pipeline", "on")
    yield s
    s.stop()


def replies(server):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="x")

    def ask(i):
        stop = ["4."] if i == 3 else None  # a stop string ends it while a step is ahead
        # One seeded sampled request (no cut: its draws are decided with the steps, pipelined too).
        sampling = {"temperature": 0.8, "seed": 5} if i == 2 else {"temperature": 0}
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": ASKS[i]}],
                                      max_tokens=40, stop=stop, **sampling)
        return r.choices[0].message.content, r.choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(len(ASKS)) as pool:
        return list(pool.map(ask, range(len(ASKS))))


def test_pipelined_replies_equal_plain_ones(server, piped_server):
    plain, piped = replies(server), replies(piped_server)
    assert piped == plain
    assert piped[3] == ("1. 1\n2. 2\n3. 3", "stop")  # cut at the stop string
    assert piped[1][1] == "stop"  # the end-of-turn token, with the next step already enqueued
    assert metric(piped_server.url, "tempo9_pipelined_steps_total") > 0
    assert metric(piped_server.url, "tempo9_discarded_tokens_total") > 0
    assert metric(server.url, "tempo9_pipelined_steps_total") == 0
