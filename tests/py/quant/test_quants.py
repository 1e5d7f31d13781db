"""Parity of Tempo9's reference (de)quantizers with gguf-py's independent gguf.quants.

Every run draws fresh random data (the seed is printed in failure messages so a failure can be
replayed with TEMPO9_QUANT_SEED=<seed>). Dequantization must be bit-exact for every type;
quantization must be byte-exact where gguf.quants implements the same reference algorithm, and
for the k-quants (which gguf.quants 0.19 cannot quantize) the round-trip error is checked against
gguf's own quantizers of the same bit width on the same data and against a per-format bound.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

REPO = Path(__file__).resolve().parents[3]


def tool_path() -> Path:
    env = os.environ.get("TEMPO9_BINARY_DIR")
    candidates = [Path(env) / "tests" / "quant_tool"] if env else [
        REPO / "build" / "tests" / "quant_tool",
        REPO / "build-quant" / "tests" / "quant_tool",  # development build of the quant owner
    ]
    for c in candidates:
        if c.is_file():
            return c
    raise AssertionError(f"quant_tool not found; looked at {[str(c) for c in candidates]}")


SEED = int(os.environ.get("TEMPO9_QUANT_SEED", int.from_bytes(os.urandom(4), "little")))


def rng_for(name: str) -> np.random.Generator:
    # Independent stream per test so each test can be replayed alone with the same seed.
    return np.random.default_rng([SEED, sum(name.encode())])


def run_tool(tmp_path: Path, mode: str, type_name: str, data: np.ndarray) -> np.ndarray:
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(data.tobytes())
    r = subprocess.run([str(tool_path()), mode, type_name, str(src), str(dst)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"quant_tool {mode} {type_name} failed: {r.stderr}"
    raw = np.frombuffer(dst.read_bytes(), dtype=np.uint8)
    return raw.view(np.float32) if mode == "dequant" else raw


# ---------------------------------------------------------------------------------------------
# Dequantization: random blocks, bit-exact.

# Byte offsets of the fp16 scale fields in each block: they get random FINITE fp16 values (any
# sign, subnormals and zeros included); all other bytes are uniformly random.
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
DEQUANT_TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K,
                 T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K, T.IQ4_NL, T.IQ4_XS]


def random_finite_f16_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    inf_nan = (bits & 0x7C00) == 0x7C00
    bits[inf_nan] ^= 0x4000  # exponent 31 -> 15: finite
    return bits


def random_blocks(rng: np.random.Generator, qtype: T, n_blocks: int) -> np.ndarray:
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint16).astype(np.uint8)
    for off in FP16_FIELDS.get(qtype, []):
        blocks[:, off:off + 2] = random_finite_f16_bits(rng, n_blocks).view(np.uint8).reshape(-1, 2)
    if qtype == T.Q8_K:
        # d is a float32; random finite bits (exponent 255 excluded).
        d = rng.integers(0, 1 << 32, size=n_blocks, dtype=np.uint64).astype(np.uint32)
        d[(d & 0x7F800000) == 0x7F800000] ^= 0x40000000
        blocks[:, 0:4] = d.view(np.uint8).reshape(-1, 4)
    # F32/F16/BF16 keep fully random bits: NaN, inf and subnormal inputs are part of the test.
    return blocks.reshape(-1)


def reference_dequant(qtype: T, data: np.ndarray) -> np.ndarray:
    if qtype == T.Q8_K:
        # gguf.quants has no Q8_K; its layout is plain: float32 d, int8 qs[256], int16 bsums[16]
        # (bsums are not used to decode). y = d * q, computed in float32 like ggml.
        blocks = data.reshape(-1, GGML_QUANT_SIZES[T.Q8_K][1])
        d = blocks[:, 0:4].copy().view(np.float32)
        q = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    return quants.dequantize(data, qtype).reshape(-1).astype(np.float32, copy=False)


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    both_nan = np.isnan(got) & np.isnan(want)
    bad = np.flatnonzero((gb != wb) & ~both_nan)
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {got.size} values differ (seed {SEED}); "
                             f"first at {i}: got {got[i]!r} ({gb[i]:#010x}), "
                             f"want {want[i]!r} ({wb[i]:#010x})")


@pytest.mark.parametrize("qtype", DEQUANT_TYPES, ids=lambda t: t.name)
def test_dequantize_matches_gguf_bitwise(qtype: T, tmp_path: Path) -> None:
    rng = rng_for("dequant" + qtype.name)
    block_size, _ = GGML_QUANT_SIZES[qtype]
    n_blocks = 4096 if block_size == 1 else 96 * 256 // block_size
    data = random_blocks(rng, qtype, n_blocks)
    got = run_tool(tmp_path, "dequant", qtype.name, data)
    assert_bit_equal(got, reference_dequant(qtype, data), f"dequantize {qtype.name}")


def test_dequantize_rejects_partial_block(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(bytes(143))  # one byte short of a Q4_K block
    r = subprocess.run([str(tool_path()), "dequant", "Q4_K", str(src), str(dst)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "143 bytes is not a whole number of Q4_K blocks of 144 bytes" in r.stderr
