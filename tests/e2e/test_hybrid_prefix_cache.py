"""The prefix cache on a hybrid model (Gated DeltaNet + gated attention + MoE), end to end: an
agent conversation through the OpenAI SDK, against a server with the prefix cache and one with
--no-prefix-cache. The model is `tempo9 synth --arch qwen35moe --preset tiny` (random weights:
the text is noise, but greedy decoding makes it exact and comparable).

Each turn re-sends the whole history. From turn 2 on the cached server must report cached prompt
tokens (KV blocks + a restored recurrent-state checkpoint) and compute only the rest — its
/metrics counters prove it — while every reply stays identical to the uncached server's."""
import subprocess

import openai
import pytest

from live_server import BIN, Server, metric

BLOCK = 16  # the engine's KV block size (tokens)

SYSTEM = ("You are a coding agent. Tools: read_file(path), write_file(path, text), "
          "run(cmd). Answer tersely. " * 12)


@pytest.fixture(scope="module")
def tiny_hybrid(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "tiny-qwen35moe.gguf"
    subprocess.run([BIN, "synth", "--arch", "qwen35moe", "--preset", "tiny", "--quant", "Q8_0",
                    "--seed", "5", "-o", str(path)], check=True, capture_output=True)
    return path


def test_five_turn_conversation_is_exact_and_reuses_the_history(tiny_hybrid):
    cached, plain = Server(tiny_hybrid), Server(tiny_hybrid, "--no-prefix-cache")
    try:
        clients = [openai.OpenAI(base_url=s.url + "/v1", api_key="x") for s in (cached, plain)]
        history = [{"role": "system", "content": SYSTEM},
                   {"role": "user", "content": "List the files in src/ and summarise them."}]
        prev_prompt = 0
        for turn in range(5):
            before = metric(cached.url, "tempo9_computed_tokens_total")
            a, b = (c.chat.completions.create(model="m", messages=history, max_tokens=12,
                                              temperature=0) for c in clients)
            computed = metric(cached.url, "tempo9_computed_tokens_total") - before
            assert a.choices[0].message.content == b.choices[0].message.content, f"turn {turn}"
            assert a.usage.prompt_tokens == b.usage.prompt_tokens
            assert b.usage.prompt_tokens_details.cached_tokens == 0
            hit = a.usage.prompt_tokens_details.cached_tokens
            if turn == 0:
                assert hit == 0
            else:
                # At least the previous prompt up to its last block boundary: the state there was
                # checkpointed (the reply, re-tokenized from text, may or may not match further).
                assert hit >= prev_prompt // BLOCK * BLOCK > 0, f"turn {turn}: {hit} cached"
            # Only the uncached part of the prompt and the reply (its last token is sampled, not
            # computed) went through the model.
            assert computed == a.usage.prompt_tokens - hit + a.usage.completion_tokens - 1
            print(f"turn {turn}: prompt {a.usage.prompt_tokens} cached {hit} computed {computed:.0f}")
            prev_prompt = a.usage.prompt_tokens
            history += [{"role": "assistant", "content": a.choices[0].message.content},
                        {"role": "user", "content": f"Now run the tests, step {turn}."}]
        assert metric(cached.url, "tempo9_state_checkpoints") > 0
        assert metric(plain.url, "tempo9_state_checkpoints") == 0
    finally:
        cached.stop()
        plain.stop()


@pytest.mark.parametrize("size, reason", [("12Q", "--state-memory: unknown suffix 'Q'"),
                                          ("abc", "--state-memory: 'abc' is not a size")])
def test_state_memory_rejects_a_bad_size(tiny_hybrid, size, reason):
    r = subprocess.run([BIN, "serve", "-m", str(tiny_hybrid), "--state-memory", size,
                        "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert reason in r.stderr
