"""Shared by the synth goldens maker (llama-cpp-python venv) and the parity test (project venv)."""
import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parent / "data"

# Every architecture synth writes; llama-cpp-python 0.3.36 loads all of them.
ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen3next", "qwen35", "qwen35moe"]
# F32 isolates the architecture (both sides do exact float matmuls); Q4_K_M adds the quant mix
# (Q4_K, Q5_K?, Q6_K tensors) and both sides' quantized kernels.
QUANTS = ["F32", "Q4_K_M"]
SEED = 20261129
N_TOKENS = 64
TOP_K = 16


def token_ids():
    """64 fixed ids over the tokenizer's real tokens (bytes, merges, specials: ids 0..306)."""
    ids, x = [], 12345
    for _ in range(N_TOKENS):
        x = (x * 1103515245 + 12345) % (1 << 31)
        ids.append((x >> 8) % 307)
    return ids


def tempo9_bin():
    if os.environ.get("TEMPO9_BIN"):
        return os.environ["TEMPO9_BIN"]
    return str(Path(os.environ.get("TEMPO9_BINARY_DIR", ROOT / "build")) / "tempo9")


def logits_dump_bin():
    return str(Path(os.environ.get("TEMPO9_BINARY_DIR", ROOT / "build")) / "tests" / "logits_dump")


def synth_args(arch, quant):
    return ["synth", "--arch", arch, "--preset", "tiny", "--quant", quant, "--seed", str(SEED)]


def synth(arch, quant, out):
    subprocess.run([tempo9_bin(), *synth_args(arch, quant), "-o", str(out)], check=True,
                   capture_output=True)
    return out


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def golden_path(arch, quant):
    return DATA / f"{arch}-{quant}.golden.json"
