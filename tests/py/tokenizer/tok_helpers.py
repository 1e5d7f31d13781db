"""Shared helpers for the tokenizer parity tests: find the tempo9 binary, run it in --jsonl batch
mode, load the corpus."""
import json
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "tokenizer"
SHARED = pathlib.Path(os.environ.get("TEMPO9_SHARED_DIR", ROOT.parent / "shared"))
QWEN3_JSON = SHARED / "fixtures" / "tokenizers" / "qwen3" / "tokenizer.json"
MODELS_DIR = pathlib.Path(os.environ.get("TEMPO9_MODELS", pathlib.Path.home() / ".cache/tempo9/models"))

# The real GGUF files and the golden file for each (tests/data/tokenizer/<name>.json).
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-Q4_K_M.gguf",
    "qwen2.5": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}


def tempo9_bin():
    """$TEMPO9_BIN, else build/tempo9 (what scripts/test.sh builds)."""
    path = pathlib.Path(os.environ.get("TEMPO9_BIN", ROOT / "build" / "tempo9"))
    assert path.exists(), f"tempo9 binary not found at {path} (set TEMPO9_BIN or build it)"
    return str(path)


def corpus():
    return json.loads((DATA / "corpus.json").read_text(encoding="utf-8"))


def model_path(name):
    path = MODELS_DIR / MODELS[name]
    assert path.exists(), f"model {path} is missing (scripts/fetch_models.py fetches it)"
    return path


def tokenize_batch(source_args, texts, no_special=False, no_bos=False):
    """Ids for each text from one `tempo9 tokenize --jsonl` run."""
    args = [tempo9_bin(), "tokenize", *source_args, "--jsonl"]
    if no_special:
        args.append("--no-special")
    if no_bos:
        args.append("--no-bos")
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    out = subprocess.run(args, input=stdin.encode(), capture_output=True, check=True).stdout
    lines = out.decode().splitlines()
    assert len(lines) == len(texts), out[-2000:]
    return [json.loads(line) for line in lines]


def detokenize_batch(source_args, id_lists):
    """[(whole-decode bytes, streamed bytes)] from one `tempo9 detokenize --jsonl` run."""
    args = [tempo9_bin(), "detokenize", *source_args, "--jsonl"]
    stdin = "".join(json.dumps(ids) + "\n" for ids in id_lists)
    out = subprocess.run(args, input=stdin.encode(), capture_output=True, check=True).stdout
    rows = [json.loads(line) for line in out.decode().splitlines()]
    assert len(rows) == len(id_lists), out[-2000:]
    return [(bytes.fromhex(r["hex"]), bytes.fromhex(r["stream_hex"])) for r in rows]
