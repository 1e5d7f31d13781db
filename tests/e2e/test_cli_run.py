"""`tempo9 run` on the real SmolLM2 file (CPU): a greedy answer, the same prompt as concurrent
requests (`--parallel`: batched decode steps must not change a request's tokens, rule 7 of
docs/ARCHITECTURE.md), and the option's bad values."""
import os
import re
import subprocess

from live_server import BIN, CAPITAL_QUESTION, SMOLLM2


def run(*args, check=True):
    r = subprocess.run([BIN, "run", "-m", str(SMOLLM2), *args], capture_output=True, text=True,
                       timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def timing(pattern, stderr):
    """An integer from the timings lines on stderr."""
    m = re.search(pattern, stderr)
    assert m, stderr
    return int(m.group(1))


def generated(stderr):
    """The first request's generated-token count."""
    return timing(r"generated: (\d+) tokens", stderr)


def test_greedy_answer():
    r = run("-p", CAPITAL_QUESTION, "-n", "12", "--temp", "0")
    assert r.stdout.strip() == "The capital of France is Paris."
    assert "[engine: " in r.stderr


def test_parallel_requests_give_the_same_text():
    alone = run("-p", CAPITAL_QUESTION, "-n", "12", "--temp", "0")
    r = run("-p", CAPITAL_QUESTION, "-n", "12", "--temp", "0", "--parallel", "3")
    assert r.stdout == alone.stdout
    n = generated(alone.stderr)
    assert generated(r.stderr) == n
    # Identical greedy requests stop at the same token: three times the first one's count.
    assert f"[parallel: 3 requests, {3 * n} tokens generated in all" in r.stderr


def test_parallel_bad_values_are_errors():
    for bad in ("0", "65", "x"):
        r = run("-p", "hi", "--parallel", bad, check=False)
        assert r.returncode != 0
        assert "--parallel" in r.stderr
    r = run("--chat", "--parallel", "2", check=False)
    assert r.returncode != 0 and "excludes" in r.stderr


def engine_steps(stderr):
    """The timed run's engine step count."""
    return timing(r"\[engine: (\d+) steps", stderr)


def test_warmup_changes_neither_the_text_nor_the_timed_counts():
    # --warmup runs an untimed request of the same shape first (its prompt's first token changed,
    # so the prefix cache gives the timed run nothing): the same greedy text, and the timings
    # count only the timed run's steps (one prompt step + 11 decode steps for 12 tokens, as
    # without the warm-up).
    cold = run("-p", CAPITAL_QUESTION, "-n", "12", "--temp", "0")
    warm = run("-p", CAPITAL_QUESTION, "-n", "12", "--temp", "0", "--warmup")
    assert warm.stdout == cold.stdout
    assert generated(warm.stderr) == generated(cold.stderr)
    assert engine_steps(warm.stderr) == engine_steps(cold.stderr)
    r = run("--chat", "--warmup", check=False)
    assert r.returncode != 0 and "excludes" in r.stderr


def test_logprobs_from_the_backend_equal_the_hosts():
    """`--logprobs N`: the backend's logprobs (Backend::logprobs beside its draw) print the same
    mean and top list as the host's over copied logits (TEMPO9_SAMPLE_ON_HOST), sampled, in a
    batch of 3; and N outside [0, 20] is an error naming the option."""
    args = ("-p", CAPITAL_QUESTION, "-n", "16", "--temp", "0.8", "--seed", "9", "--logprobs", "4",
            "--parallel", "3")
    dev = run(*args)
    host = subprocess.run([BIN, "run", "-m", str(SMOLLM2), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TEMPO9_SAMPLE_ON_HOST": "1"})
    assert host.returncode == 0, host.stderr
    line = re.search(r"\[logprobs: mean (-?[\d.]+) over (\d+) tokens; first token's top:(.*)\]",
                     dev.stderr)
    assert line, dev.stderr
    assert float(line.group(1)) <= 0 and int(line.group(2)) == generated(dev.stderr)
    top = line.group(3).split()
    assert len(top) == 4
    lps = [float(t.split(":")[1]) for t in top]
    assert lps == sorted(lps, reverse=True) and lps[0] <= 0
    assert dev.stdout == host.stdout
    assert line.group(0) in host.stderr
    for bad in ("21", "-2"):
        r = run("-p", "hi", "--logprobs", bad, check=False)
        assert r.returncode != 0 and "--logprobs" in r.stderr
