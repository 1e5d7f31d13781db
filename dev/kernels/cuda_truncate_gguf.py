#!/usr/bin/env python3
"""Write a copy of a llama-family GGUF that keeps only its first N blocks.

The device machine takes at most 64 MiB per call, so the real SmolLM2 file (94 MB) cannot go
there whole; its first blocks with the real tokenizer, chat template and tied Q8_0 embedding can.
The result is a smaller, still well-formed model (same metadata except <arch>.block_count): good
for `tempo9 run/serve --backend cuda` vs `--backend cpu` on one file, not for answer quality.

    python3 dev/kernels/cuda_truncate_gguf.py IN.gguf OUT.gguf --blocks 3
"""
import argparse
import re

import gguf


def copy_field(w: gguf.GGUFWriter, key: str, field: gguf.ReaderField, arch: str, blocks: int):
    vt = field.types[0]
    if key == f"{arch}.block_count":
        w.add_uint32(key, blocks)
        return
    if vt == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            vals = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
        else:
            vals = [field.parts[i].tolist()[0] for i in field.data]
        w.add_key_value(key, vals, vt, sub_type=sub)
    elif vt == gguf.GGUFValueType.STRING:
        w.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8"), vt)
    else:
        w.add_key_value(key, field.parts[field.data[0]].tolist()[0], vt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--blocks", type=int, required=True)
    a = ap.parse_args()
    r = gguf.GGUFReader(a.src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(a.dst, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        copy_field(w, key, field, arch, a.blocks)
    for t in r.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= a.blocks:
            continue
        # t.data is [rows, bytes per row] for quantized types (the writer converts it back).
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
