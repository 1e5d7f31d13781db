#!/usr/bin/env python3
"""Golden token ids from the peer (llama.cpp through llama-cpp-python, built by
scripts/build_peer.sh) for each real GGUF model, over tests/data/tokenizer/corpus.json plus texts
made of every control / user-defined token of the vocab.

Usage: .venv-peer/bin/python scripts/golden_tokenizer.py [smollm2 gemma3 qwen2.5]
Writes tests/data/tokenizer/<name>.json: {"model", "peer", "cases": [{"name", "text",
"add_bos", "special", "ids"}]}. Each text is tokenized twice: add_bos=True, special=True (a
prompt) and add_bos=False, special=False (user text with special strings kept as text)."""
import ctypes
import datetime
import json
import os
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "tokenizer"
MODELS_DIR = pathlib.Path(os.environ.get("TEMPO9_MODELS", pathlib.Path.home() / ".cache/tempo9/models"))
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-Q4_K_M.gguf",
    "qwen2.5": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}
ATTR_CONTROL, ATTR_USER_DEFINED = 1 << 3, 1 << 4
SPECIALS_PER_TEXT = 200

try:
    import llama_cpp
except ModuleNotFoundError as e:  # only the prompt cache needs diskcache; tokenizing does not
    if e.name != "diskcache":
        raise
    sys.modules["diskcache"] = types.SimpleNamespace(Cache=object)
    import llama_cpp


def special_texts(llm):
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    toks = []
    for i in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        if llama_cpp.llama_vocab_get_attr(vocab, i) & (ATTR_CONTROL | ATTR_USER_DEFINED):
            text = llama_cpp.llama_vocab_get_text(vocab, i)
            if text:
                toks.append(ctypes.string_at(text).decode("utf-8", "replace"))
    texts = []
    for k in range(0, len(toks), SPECIALS_PER_TEXT):
        chunk = toks[k:k + SPECIALS_PER_TEXT]
        texts.append({"name": f"specials_{k}", "text": "x " + " ".join(chunk) + "y"})
        texts.append({"name": f"specials_glued_{k}", "text": "".join(chunk)})
    return texts


def main(names):
    corpus = json.loads((DATA / "corpus.json").read_text(encoding="utf-8"))
    for name in names:
        path = MODELS_DIR / MODELS[name]
        llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        cases = []
        for entry in corpus + special_texts(llm):
            for add_bos, special in ((True, True), (False, False)):
                ids = llm.tokenize(entry["text"].encode("utf-8"), add_bos=add_bos, special=special)
                cases.append({"name": entry["name"], "text": entry["text"], "add_bos": add_bos,
                              "special": special, "ids": ids})
        out = {"model": MODELS[name],
               "peer": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer)",
               "generated": datetime.date.today().isoformat(), "cases": cases}
        dest = DATA / f"{name}.json"
        dest.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n",
                        encoding="utf-8")
        print(f"{name}: {len(cases)} cases -> {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODELS))
