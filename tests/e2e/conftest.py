"""Live-server fixtures (the server itself is live_server.Server)."""
import pytest

from live_server import QWEN, SMOLLM2, Server


@pytest.fixture(scope="session")
def server():
    # Requests that name no limit (Ollama without num_predict, OpenAI chat without max_tokens)
    # stop at 64 tokens so a test can never wait on a 4096-token generation.
    s = Server(SMOLLM2, "--default-max-tokens", "64")
    yield s
    assert s.proc.poll() is None, "server died during the tests:\n" + s.log_path.read_text()
    s.stop()


@pytest.fixture(scope="session")
def qwen_server():
    s = Server(QWEN)
    yield s
    assert s.proc.poll() is None, "server died during the tests:\n" + s.log_path.read_text()
    s.stop()
