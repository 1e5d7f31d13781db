"""`tempo9 parity` on the real files: the CPU backend against itself at another thread count,
whole-batch and one token per step, must agree bit for bit (threading and batching never change a
value on the CPU: docs/ARCHITECTURE.md rule 7) — SmolLM2 (Q4_1, Q8_0 embeddings) and
Qwen2.5-Coder-1.5B (Q4_K, Q6_K, biases); and bad options are errors."""
import re
import subprocess

import pytest

from live_server import BIN, QWEN, SMOLLM2


def parity(*args, model=SMOLLM2):
    return subprocess.run([BIN, "parity", "-m", str(model), *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("model,n", [(SMOLLM2, 48), (QWEN, 24)], ids=["smollm2", "qwen2.5"])
def test_cpu_threads_and_steps_are_bitwise_equal(model, n):
    r = parity("--tokens", str(n), "--threads", "1", "--ref-threads", "2", model=model)
    assert r.returncode == 0, r.stdout + r.stderr
    for mode in ("whole", "stepped"):
        m = re.search(rf"^{mode}\s+max \|d\| (\S+)\s+top-1 (\d+)/{n}\s+clear top-1 (\d+)/(\d+)$",
                      r.stdout, re.M)
        assert m, r.stdout
        assert float(m.group(1)) == 0.0
        assert int(m.group(2)) == n
        assert m.group(3) == m.group(4)
    assert r.stdout.rstrip().endswith("parity: ok")


def test_bad_options_are_errors(tmp_path):
    r = parity("--backend", "tpu")
    assert r.returncode != 0 and "--backend" in r.stderr
    r = parity("--tokens", "1")
    assert r.returncode != 0 and "--tokens" in r.stderr
    r = parity("--text", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = parity("--text", str(empty))
    assert r.returncode == 2 and "no tokens" in r.stderr
