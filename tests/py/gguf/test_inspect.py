"""`tempo9 inspect --json` on each real model against what gguf-py's GGUFReader reports for the same
file, and `tempo9 inspect` on broken files: exit code 1 and one message with the byte offset."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict

import pytest

from gguf_helpers import MODELS, cached_reader, model_path, tempo9_bin


def inspect(path, *extra):
    return subprocess.run([str(tempo9_bin()), "inspect", str(path), *extra],
                          capture_output=True, text=True)


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


@pytest.mark.parametrize("model", MODELS)
def test_inspect_json_matches_gguf_py(model):
    path = model_path(model)
    r = inspect(path, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)

    reader = cached_reader(path)
    arch = field(reader, "general.architecture")
    assert got["architecture"] == arch
    assert got["name"] == field(reader, "general.name")
    assert got["file_size"] == path.stat().st_size
    assert got["gguf_version"] == int(reader.fields["GGUF.version"].parts[0][0])
    assert got["alignment"] == reader.alignment
    assert got["n_tensors"] == len(reader.tensors)
    assert got["n_params"] == sum(int(t.n_elements) for t in reader.tensors)
    mix = defaultdict(lambda: {"n_tensors": 0, "n_bytes": 0})
    for t in reader.tensors:
        mix[t.tensor_type.name]["n_tensors"] += 1
        mix[t.tensor_type.name]["n_bytes"] += int(t.n_bytes)
    assert got["quant_mix"] == dict(mix)
    assert got["context_length"] == field(reader, f"{arch}.context_length")
    assert got["embedding_length"] == field(reader, f"{arch}.embedding_length")
    assert got["block_count"] == field(reader, f"{arch}.block_count")
    assert got["head_count"] == field(reader, f"{arch}.attention.head_count")
    assert got["head_count_kv"] == field(reader, f"{arch}.attention.head_count_kv")
    tok = got["tokenizer"]
    assert tok["model"] == field(reader, "tokenizer.ggml.model")
    assert tok["pre"] == field(reader, "tokenizer.ggml.pre")
    assert tok["vocab_size"] == len(reader.fields["tokenizer.ggml.tokens"].data)
    assert got["has_chat_template"] == ("tokenizer.chat_template" in reader.fields)


def test_inspect_text_names_the_essentials():
    r = inspect(model_path("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    assert r.returncode == 0, r.stderr
    # Values from gguf-py (see test above); the text form must show them.
    for needle in ["architecture:      qwen2", "context length:    32768", "heads (q / kv):    12 / 2",
                   "gpt2 (pre qwen2), vocab 151936", "chat template:     yes", "Q6_K"]:
        assert needle in r.stdout, (needle, r.stdout)


def test_inspect_truncated_file(tmp_path):
    src = model_path("SmolLM2-135M-Instruct.Q4_1.gguf")
    raw = src.read_bytes()
    reader = cached_reader(src)
    first = reader.tensors[0]
    cases = {
        # Inside the vocabulary array: the metadata itself is cut.
        "meta": 300_000,
        # After the header, inside the first tensor's data.
        "data": first.data_offset + first.n_bytes // 2,
        # Only the last byte missing.
        "last": len(raw) - 1,
    }
    for label, n in cases.items():
        bad = tmp_path / f"trunc_{label}.gguf"
        bad.write_bytes(raw[:n])
        for extra in ([], ["--json"]):
            r = inspect(bad, *extra)
            assert r.returncode == 1, (label, r.stdout)
            assert r.stdout == ""
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1, r.stderr
            m = re.match(rf"^{re.escape(str(bad))}: offset (\d+): .+", lines[0])
            assert m, lines[0]
            assert int(m.group(1)) < n, lines[0]
    # The data cut names the tensor whose bytes are missing.
    r = inspect(tmp_path / "trunc_data.gguf")
    assert f"tensor '{first.name}'" in r.stderr and "runs past the end" in r.stderr, r.stderr


def test_inspect_bad_magic_and_missing_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + bytes(60))
    r = inspect(bad)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"{bad}: offset 0: bad magic 47 47 4d 4c, expected 'GGUF' "
                                "(47 47 55 46)")
    r = inspect(tmp_path / "nope.gguf")
    assert r.returncode == 1 and "cannot open" in r.stderr
