"""Files written by our GgufWriter (through tests/tools/gguf_json) read back identically in gguf-py's
GGUFReader — every key, value type, value (nested arrays included), tensor name, shape, type and
byte — and in our own reader. Values are random (seed printed on failure; replay with
TEMPO9_GGUF_SEED=<seed>)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES

from gguf_helpers import our_dump, our_write, reader_kv, tensor_bytes

SEED = int(os.environ.get("TEMPO9_GGUF_SEED", int.from_bytes(os.urandom(4), "little")))

INT_RANGES = {
    "UINT8": (0, 2**8 - 1), "INT8": (-(2**7), 2**7 - 1),
    "UINT16": (0, 2**16 - 1), "INT16": (-(2**15), 2**15 - 1),
    "UINT32": (0, 2**32 - 1), "INT32": (-(2**31), 2**31 - 1),
    "UINT64": (0, 2**64 - 1), "INT64": (-(2**63), 2**63 - 1),
}
WORDS = ["", "a", "héllo", "日本語", "✓ tick", "tab\tnew\nline", "Ġthe", "<|im_start|>", "x" * 300]


def random_scalar(rng: np.random.Generator, t: str):
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        # Always include the extremes sometimes: they are where width bugs show.
        choice = rng.integers(0, 4)
        if choice == 0:
            return lo
        if choice == 1:
            return hi
        return int(rng.integers(lo, hi, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64))
    if t == "FLOAT32":
        # A float32-exact value: its JSON double converts back without rounding.
        return float(np.float32(rng.standard_normal() * 10.0 ** rng.integers(-30, 30)))
    if t == "FLOAT64":
        return float(rng.standard_normal() * 10.0 ** rng.integers(-300, 300))
    if t == "BOOL":
        return bool(rng.integers(0, 2))
    if t == "STRING":
        return str(rng.choice(WORDS)) + str(rng.integers(0, 1000))
    raise ValueError(t)


SCALARS = list(INT_RANGES) + ["FLOAT32", "FLOAT64", "BOOL", "STRING"]


def random_array(rng: np.random.Generator, depth: int) -> dict:
    if depth > 0 and rng.integers(0, 2) == 0:
        n = int(rng.integers(0, 4))
        return {"elem_type": "ARRAY", "value": [random_array(rng, depth - 1) for _ in range(n)]}
    et = str(rng.choice(SCALARS))
    n = int(rng.integers(0, 6))
    return {"elem_type": et, "value": [random_scalar(rng, et) for _ in range(n)]}


def random_spec(rng: np.random.Generator, alignment: int | None) -> dict:
    kv = []
    for t in SCALARS:
        for i in range(3):
            kv.append({"key": f"test.{t.lower()}.{i}", "type": t, "value": random_scalar(rng, t)})
    for i in range(12):
        kv.append({"key": f"test.array.{i}", "type": "ARRAY", **random_array(rng, 3)})
    kv.append({"key": "test.array.nested3", "type": "ARRAY", "elem_type": "ARRAY", "value": [
        {"elem_type": "ARRAY", "value": [{"elem_type": "STRING", "value": ["a", "b"]}]},
        {"elem_type": "ARRAY", "value": []}]})
    kv.append({"key": "test.array.empty", "type": "ARRAY", "elem_type": "FLOAT32", "value": []})
    kv.append({"key": "tokenizer.ggml.tokens", "type": "ARRAY", "elem_type": "STRING",
               "value": [f"tok{i}" for i in range(20000)]})
    if alignment is not None:
        kv.append({"key": "general.alignment", "type": "UINT32", "value": alignment})
    tensors = []
    types = [QT.F32, QT.F16, QT.BF16, QT.F64, QT.I8, QT.I16, QT.I32, QT.I64, QT.Q4_0, QT.Q4_1,
             QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.Q8_K,
             QT.IQ2_XXS, QT.IQ2_XS, QT.IQ3_XXS, QT.IQ1_S, QT.IQ4_NL, QT.IQ3_S, QT.IQ2_S, QT.IQ4_XS,
             QT.IQ1_M, QT.TQ1_0, QT.TQ2_0, QT.MXFP4]
    for i, qt in enumerate(types):
        block, type_size = GGML_QUANT_SIZES[qt]
        n_dims = int(rng.integers(1, 5))
        ne = [block * int(rng.integers(1, 4))] + [int(rng.integers(1, 4)) for _ in range(n_dims - 1)]
        n_bytes = int(np.prod(ne)) // block * type_size
        data = rng.integers(0, 256, n_bytes, dtype=np.uint8).tobytes()
        tensors.append({"name": f"blk.{i}.{qt.name.lower()}", "ne": ne, "type": qt.name,
                        "data_hex": data.hex()})
    return {"kv": kv, "tensors": tensors}


@pytest.mark.parametrize("alignment", [None, 64, 1024])
def test_gguf_py_reads_our_file(tmp_path, alignment):
    rng = np.random.default_rng([SEED, alignment or 32])
    spec = random_spec(rng, alignment)
    path = our_write(spec, tmp_path)
    where = f"(seed {SEED}, alignment {alignment})"

    reader = GGUFReader(path)
    assert int(reader.fields["GGUF.version"].parts[0][0]) == 3
    assert reader.alignment == (alignment or 32), where
    got = reader_kv(reader)
    assert list(got) == [kv["key"] for kv in spec["kv"]], where
    for kv in spec["kv"]:
        expect = {k: kv[k] for k in ("type", "value", "elem_type") if k in kv}
        assert got[kv["key"]] == expect, f"{kv['key']} {where}"
        # GGUFReader's own typed view agrees on the scalar ones too.
        if kv["type"] not in ("ARRAY",):
            assert reader.fields[kv["key"]].types[0].name == kv["type"]

    assert [t.name for t in reader.tensors] == [t["name"] for t in spec["tensors"]], where
    for t, st in zip(reader.tensors, spec["tensors"]):
        assert t.tensor_type.name == st["type"], f"{st['name']} {where}"
        assert [int(x) for x in t.shape] == st["ne"], f"{st['name']} {where}"
        assert t.data_offset % (alignment or 32) == 0, f"{st['name']} {where}"
        assert tensor_bytes(t) == bytes.fromhex(st["data_hex"]), f"{st['name']} {where}"


def test_our_reader_reads_our_file(tmp_path):
    rng = np.random.default_rng([SEED, 7])
    spec = random_spec(rng, 64)
    path = our_write(spec, tmp_path)
    dump = our_dump(path, data=True)
    assert dump["version"] == 3 and dump["alignment"] == 64
    assert dump["kv"] == spec["kv"], f"seed {SEED}"
    for t, st in zip(dump["tensors"], spec["tensors"], strict=True):
        assert (t["name"], t["ne"], t["type"], t["data_hex"]) == \
            (st["name"], st["ne"], st["type"], st["data_hex"]), f"seed {SEED}"


def test_header_bytes_are_exact(tmp_path):
    """The first bytes follow the GGUF spec exactly (magic, version 3, counts, first key)."""
    spec = {"kv": [{"key": "general.architecture", "type": "STRING", "value": "llama"}],
            "tensors": [{"name": "w", "ne": [4], "type": "F32", "data_hex": "00" * 16}]}
    raw = our_write(spec, tmp_path).read_bytes()
    expect = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    expect += struct.pack("<Q", 20) + b"general.architecture" + struct.pack("<IQ", 8, 5) + b"llama"
    expect += struct.pack("<Q", 1) + b"w" + struct.pack("<IQIQ", 1, 4, 0, 0)
    assert raw[: len(expect)] == expect
    data_offset = (len(expect) + 31) // 32 * 32
    assert raw[len(expect):data_offset] == b"\0" * (data_offset - len(expect))
    assert len(raw) == data_offset + 32  # 16 bytes of data padded to the alignment
