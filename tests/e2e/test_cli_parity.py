"""`tempo9 parity` on the real SmolLM2 file: the CPU backend against itself at another thread
count, whole-batch and one token per step, must agree bit for bit (threading and batching never
change a value on the CPU: docs/ARCHITECTURE.md rule 7), and bad options are errors."""
import re
import subprocess

from live_server import BIN, SMOLLM2


def parity(*args):
    return subprocess.run([BIN, "parity", "-m", str(SMOLLM2), *args], capture_output=True,
                          text=True, timeout=300)


def test_cpu_threads_and_steps_are_bitwise_equal():
    r = parity("--tokens", "48", "--threads", "1", "--ref-threads", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    for mode in ("whole", "stepped"):
        m = re.search(rf"^{mode}\s+max \|d\| (\S+)\s+top-1 (\d+)/48\s+clear top-1 (\d+)/(\d+)$",
                      r.stdout, re.M)
        assert m, r.stdout
        assert float(m.group(1)) == 0.0
        assert int(m.group(2)) == 48
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
