"""Shared helpers of the GGUF tests: locating our binaries and the models, and decoding a
gguf.GGUFReader field into plain Python values (nested arrays included) so that every key, type and
value can be compared with what our reader/writer says."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFValueType

REPO = Path(__file__).resolve().parents[3]


def _first_file(candidates: list[Path], what: str) -> Path:
    for c in candidates:
        if c.is_file():
            return c
    raise AssertionError(f"{what} not found; looked at {[str(c) for c in candidates]}")


def tempo9_bin() -> Path:
    env = os.environ.get("TEMPO9_BIN")
    if env:
        return _first_file([Path(env)], "tempo9 (TEMPO9_BIN)")
    # build/ is the canonical build; build-gguf/ is the GGUF owner's development build.
    return _first_file([REPO / "build" / "tempo9", REPO / "build-gguf" / "tempo9"], "tempo9")


def gguf_json_bin() -> Path:
    env = os.environ.get("TEMPO9_BINARY_DIR")
    if env:
        return _first_file([Path(env) / "tests" / "gguf_json"], "gguf_json")
    return _first_file([REPO / "build" / "tests" / "gguf_json",
                        REPO / "build-gguf" / "tests" / "gguf_json"], "gguf_json")


def model_path(name: str) -> Path:
    d = Path(os.environ.get("TEMPO9_MODELS", Path.home() / ".cache" / "tempo9" / "models"))
    p = d / name
    # A missing model is a failure, never a skip.
    assert p.is_file(), f"model {p} is missing (scripts/fetch_models.py fetches it)"
    return p


MODELS = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-Q4_K_M.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
]


@functools.lru_cache(maxsize=None)
def cached_reader(path: Path) -> GGUFReader:
    """GGUFReader is slow on the big vocabularies (tens of seconds on a busy box): share one per
    model across the test files of a session."""
    return GGUFReader(path)


def our_dump(path: Path, data: bool = False) -> dict[str, Any]:
    cmd = [str(gguf_json_bin()), "dump", str(path)] + (["--data"] if data else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"gguf_json dump {path} failed: {r.stderr}"
    return json.loads(r.stdout)


def our_write(spec: dict[str, Any], tmp_path: Path, name: str = "out.gguf") -> Path:
    spec_path, out = tmp_path / (name + ".json"), tmp_path / name
    spec_path.write_text(json.dumps(spec))
    r = subprocess.run([str(gguf_json_bin()), "write", str(spec_path), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"gguf_json write failed: {r.stderr}"
    return out


def decode_field(field) -> dict[str, Any]:
    """A GGUFReader field in our JSON encoding ({"type", "value"[, "elem_type"]}), rebuilt from
    its raw parts: contents() flattens nested arrays, the parts keep every level."""
    parts = iter(field.parts[3:])  # after key length, key bytes, value type

    def scalar(t: GGUFValueType) -> Any:
        if t == GGUFValueType.STRING:
            next(parts)  # the length
            return bytes(next(parts)).decode("utf-8")
        v = next(parts)[0]
        if t == GGUFValueType.BOOL:
            return bool(v)
        if t in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
            return float(v)
        return int(v)

    def array() -> dict[str, Any]:
        et = GGUFValueType(int(next(parts)[0]))
        n = int(next(parts)[0])
        items = [array() if et == GGUFValueType.ARRAY else scalar(et) for _ in range(n)]
        return {"elem_type": et.name, "value": items}

    vtype = GGUFValueType(int(field.parts[2][0]))
    if vtype == GGUFValueType.ARRAY:
        return {"type": vtype.name, **array()}
    return {"type": vtype.name, "value": scalar(vtype)}


def reader_kv(reader: GGUFReader) -> dict[str, dict[str, Any]]:
    """Every metadata key as {"type", "value"[, "elem_type"]} in our JSON encoding."""
    out: dict[str, dict[str, Any]] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # header pseudo-fields gguf-py adds
        out[key] = decode_field(field)
    return out


def ours_kv(dump: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for kv in dump["kv"]:
        e = {"type": kv["type"], "value": kv["value"]}
        if kv["type"] == "ARRAY":
            e["elem_type"] = kv["elem_type"]
        out[kv["key"]] = e
    return out


def tensor_bytes(t) -> bytes:
    return np.ascontiguousarray(t.data).tobytes()
