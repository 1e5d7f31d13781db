"""Our GgufFile (through tests/tools/gguf_json dump) against gguf-py's independent GGUFReader: on the
three real models, and on files written by gguf-py's GGUFWriter. Every key, value type and value
(all 150k-entry vocab arrays included), every tensor's name, shape, type, absolute offset and size,
and sample bytes of each tensor's data must agree."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType, GGUFWriter

from gguf_helpers import (MODELS, cached_reader, model_path, our_dump, ours_kv, reader_kv,
                          tensor_bytes)


def compare_with_reader(path, data: bool):
    reader = cached_reader(path)
    ours = our_dump(path, data=data)
    assert ours["version"] == int(reader.fields["GGUF.version"].parts[0][0])
    assert ours["alignment"] == reader.alignment
    theirs_kv = reader_kv(reader)
    mine_kv = ours_kv(ours)
    assert list(mine_kv) == list(theirs_kv)
    for key in theirs_kv:
        assert mine_kv[key] == theirs_kv[key], key
    assert [t["name"] for t in ours["tensors"]] == [t.name for t in reader.tensors]
    raw = reader.data  # memmap of the whole file
    for mine, t in zip(ours["tensors"], reader.tensors):
        assert mine["ne"] == [int(x) for x in t.shape], t.name
        assert mine["type"] == t.tensor_type.name, t.name
        assert ours["data_offset"] + mine["offset"] == t.data_offset, t.name
        assert mine["n_bytes"] == t.n_bytes, t.name
        if data:
            assert bytes.fromhex(mine["data_hex"]) == tensor_bytes(t), t.name
        else:
            head = bytes(raw[t.data_offset:t.data_offset + min(16, t.n_bytes)])
            end = t.data_offset + t.n_bytes
            tail = bytes(raw[end - min(16, t.n_bytes):end])
            assert (bytes.fromhex(mine["head_hex"]), bytes.fromhex(mine["tail_hex"])) == \
                (head, tail), t.name
    return ours, reader


@pytest.mark.parametrize("model", MODELS)
def test_real_model_matches_gguf_py(model):
    ours, reader = compare_with_reader(model_path(model), data=False)
    assert len(ours["tensors"]) == len(reader.tensors) > 200


def test_reads_gguf_py_writer_file(tmp_path):
    path = tmp_path / "gguf_py.gguf"
    w = GGUFWriter(path, "llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 255)
    w.add_int8("t.i8", -128)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 2**32 - 1)
    w.add_int32("t.i32", -(2**31))
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float32("t.f32", 0.1)  # stored as the float32 nearest 0.1
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo 日本")
    w.add_array("t.arr_str", ["a", "", "Ġb"])
    w.add_key_value("t.arr_u16", [1, 2, 65535], GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT16)
    w.add_array("t.arr_f32", [0.5, -1.25])
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_array("t.nested_str", [["x"], ["y", "z"]])
    rng = np.random.default_rng(5)
    w.add_tensor("f32", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((2, 5)).astype(np.float16))
    w.add_tensor("q8", rng.integers(0, 256, (2, 68), dtype=np.uint8),
                 raw_dtype=QT.Q8_0)
    w.add_tensor("i32", np.arange(7, dtype=np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    ours, _ = compare_with_reader(path, data=True)
    kv = ours_kv(ours)
    # Spot checks against the values written above (not just agreement of two readers).
    assert kv["general.alignment"] == {"type": "UINT32", "value": 64}
    assert kv["t.u64"]["value"] == 2**64 - 1 and kv["t.i64"]["value"] == -(2**63)
    assert kv["t.f32"] == {"type": "FLOAT32", "value": float(np.float32(0.1))}
    assert kv["t.arr_u16"] == {"type": "ARRAY", "elem_type": "UINT16", "value": [1, 2, 65535]}
    assert kv["t.nested"] == {"type": "ARRAY", "elem_type": "ARRAY", "value": [
        {"elem_type": "INT32", "value": [1, 2]}, {"elem_type": "INT32", "value": [3]}]}
    shapes = {t["name"]: (t["ne"], t["type"]) for t in ours["tensors"]}
    # gguf-py reverses numpy's shape into ggml order (ne[0] = last numpy axis).
    assert shapes == {"f32": ([8, 3], "F32"), "f16": ([5, 2], "F16"),
                      "q8": ([64, 2], "Q8_0"), "i32": ([7], "I32")}
    assert all(t["offset"] % 64 == 0 for t in ours["tensors"])
