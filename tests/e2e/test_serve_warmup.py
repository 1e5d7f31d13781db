"""`serve --warmup on`: before the port opens the server runs a few short sequences (its own
prompts: max_seqs of them, capped at 8, of min(prefill chunk, 256, ctx/4) tokens, 4 generated)
so the first requests pay no first-use costs, and /metrics then starts from zero."""
import json
import urllib.request

from live_server import SMOLLM2, Server, metric


def test_warmup_runs_before_serving_and_leaves_no_counts():
    s = Server(SMOLLM2, "--warmup", "on", "--max-seqs", "2", "--prefill-chunk", "64")
    try:
        log = s.log_path.read_text()
        assert "warm-up: 2 sequences of 64 prompt tokens and 4 generated" in log
        assert log.index("warm-up:") < log.index("serving ")
        assert metric(s.url, "tempo9_requests_total") == 0
        assert metric(s.url, "tempo9_engine_steps_total") == 0
        body = json.dumps({"model": "m", "prompt": "The capital of France is", "max_tokens": 3,
                           "temperature": 0}).encode()
        req = urllib.request.Request(s.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert json.loads(r.read())["usage"]["completion_tokens"] == 3
        assert metric(s.url, "tempo9_requests_total") == 1
    finally:
        s.stop()
