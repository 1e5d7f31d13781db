"""`tempo9 synth --dry-run` on the real-shape presets: the printed tensor list, byte size and
parameter count, checked against the published models (parameter counts from the model cards,
tensor counts from the architectures' layer layouts)."""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_helpers as h  # noqa: E402

# preset: (published parameters, tensors = globals + per-layer tensors x layers)
REAL = {
    # Qwen3-8B: 8.2B; 36 layers x (attn_norm, q, k, v, q_norm, k_norm, o, ffn_norm, gate, up,
    # down) + token_embd, output_norm, output.
    "qwen3-8b": (8.19e9, 3 + 36 * 11),
    # Llama 3.1 8B: 8.03B; 32 layers x 9 (no q/k norms).
    "llama-3.1-8b": (8.03e9, 3 + 32 * 9),
    # Qwen3-30B-A3B: 30.5B; 48 layers x (7 attention + ffn_norm + router + 3 expert stacks).
    "qwen3-30b-a3b": (30.5e9, 3 + 48 * 12),
    # Qwen3.5-35B-A3B: 35B; 30 Gated DeltaNet layers x (attn_norm, qkv, gate, beta, alpha, conv1d,
    # a, dt, ssm_norm, out) + 10 attention layers x 7, every layer + post_attention_norm, router,
    # 3 expert stacks, shared gate + 3 shared-expert matrices.
    "qwen3.5-35b-a3b": (35e9, 3 + 30 * 10 + 10 * 7 + 40 * 9),
}


def dry_run(*args):
    r = subprocess.run([h.tempo9_bin(), "synth", *args, "--dry-run"], check=True,
                       capture_output=True, text=True)
    lines = r.stdout.splitlines()
    summary = dict(line.split(" ", 1) for line in lines if line.startswith(("params", "file_bytes")))
    tensors = [line.split() for line in lines if line.startswith(("blk.", "token_embd", "output"))]
    return tensors, int(summary["params"]), int(summary["file_bytes"])


@pytest.mark.parametrize("preset", list(REAL))
def test_real_preset_dry_run(preset):
    want_params, want_tensors = REAL[preset]
    tensors, params, file_bytes = dry_run("--preset", preset, "--quant", "Q4_K_M")
    assert len(tensors) == want_tensors
    assert abs(params - want_params) <= 0.01 * want_params
    # Each row: name, dims joined by " x ", type, bytes. The data alone is below the file size
    # (metadata and alignment padding come on top), by less than the metadata's few MB.
    data_bytes = sum(int(t[-1]) for t in tensors)
    assert data_bytes < file_bytes < data_bytes + (16 << 20)
    names = [t[0] for t in tensors]
    assert len(set(names)) == len(names)
    assert {"token_embd.weight", "output_norm.weight", "output.weight"} <= set(names)


def test_dry_run_of_tiny_matches_the_written_file(tmp_path):
    _, _, file_bytes = dry_run("--arch", "qwen35moe", "--preset", "tiny", "--quant", "Q3_K_M")
    out = tmp_path / "m.gguf"
    subprocess.run([h.tempo9_bin(), "synth", "--arch", "qwen35moe", "--preset", "tiny", "--quant",
                    "Q3_K_M", "-o", str(out)], check=True, capture_output=True)
    assert out.stat().st_size == file_bytes


def test_bad_arguments_fail_cleanly():
    r = subprocess.run([h.tempo9_bin(), "synth", "--arch", "llama", "--preset", "qwen3-8b",
                        "--dry-run"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "preset 'qwen3-8b' is a qwen3 model, not llama" in r.stderr
