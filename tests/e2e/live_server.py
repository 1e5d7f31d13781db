"""A live `tempo9 serve` on a free loopback port with a real model (shared by conftest and tests).

A module of its own, not conftest: tests/py has conftest modules too, and `from conftest import`
resolves to whichever was imported first when pytest collects both trees in one run.

The binary is $TEMPO9_BIN (scripts/test.sh sets it) or build/tempo9; models come from
$TEMPO9_MODELS (scripts/fetch_models.py puts them there). A missing model fails the tests.
"""
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("TEMPO9_MODELS", Path.home() / ".cache" / "tempo9" / "models"))
BIN = os.environ.get("TEMPO9_BIN", str(ROOT / "build" / "tempo9"))
SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

# SmolLM2's greedy answer to the bare question starts with a near-tie ("The" vs "La", logprobs
# 0.03-0.25 apart) that flips between CPU kernels (scalar/AVX-512 vs AVX2/AMX round differently);
# with "Answer in English." every kernel gives "The capital of France is Paris." with a top-1
# margin >= 1.2 nats over the first 8 tokens.
CAPITAL_QUESTION = "What is the capital of France? Answer in English."


class Server:
    def __init__(self, model: Path, *extra: str):
        assert model.exists(), f"model missing: {model} (run scripts/fetch_models.py)"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tempo9-e2e-{model.stem}-{os.getpid()}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([BIN, "serve", "-m", str(model), "--port", "0", "--ctx", "8192", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.port is None:
            assert self.proc.poll() is None, "server exited:\n" + self.log_path.read_text()
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", self.log_path.read_text())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.1)
        assert self.port, "server did not start:\n" + self.log_path.read_text()
        self.url = f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except Exception:
            return False

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def metric(url, name):
    """The value of an unlabelled series in the server's /metrics (it must be there)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        m = re.search(rf"^{name} (\S+)$", r.read().decode(), re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))
