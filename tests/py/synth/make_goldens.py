#!/usr/bin/env python3
"""llama.cpp's logits on every tiny synth preset, stored as goldens for test_synth_vs_llamacpp.py.

For each architecture and quant (synth_helpers.ARCHS x QUANTS): `tempo9 synth` writes the file,
llama-cpp-python (the peer, scripts/build_peer.sh) evaluates the fixed 64 token ids teacher-forced
in one batch, and the top-16 ids and logits per position are stored with the file's sha256 (the
golden belongs to exactly those bytes). Run with the peer venv after building tempo9:
  TEMPO9_BINARY_DIR=build-synth .venv-peer/bin/python tests/py/synth/make_goldens.py
Settings as scripts/golden_logits.py: F16 KV cache, extra buffer types (AMX, repacking) off — the
AMX matmul segfaults on our Sapphire Rapids VMs, and repacking only changes summation order.
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_helpers as h  # noqa: E402


def load_llama(path):
    import llama_cpp
    import llama_cpp.llama_cpp as llama_c

    defaults = llama_c.llama_model_default_params

    def without_extra_bufts():
        p = defaults()
        p.use_extra_bufts = False
        return p

    llama_c.llama_model_default_params = without_extra_bufts
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=256, n_ubatch=256,
                          logits_all=True, n_threads=2, verbose=False)
    llama_c.llama_model_default_params = defaults
    return llm, llama_cpp.__version__


def main():
    h.DATA.mkdir(exist_ok=True)
    ids = h.token_ids()
    with tempfile.TemporaryDirectory() as tmp:
        for arch in h.ARCHS:
            for quant in h.QUANTS:
                path = h.synth(arch, quant, Path(tmp) / f"{arch}-{quant}.gguf")
                llm, version = load_llama(path)
                llm.eval(ids)
                scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
                top = np.argsort(-scores, axis=1, kind="stable")[:, : h.TOP_K]
                golden = {
                    "made_by": "tests/py/synth/make_goldens.py",
                    "peer": f"llama-cpp-python {version}",
                    "synth_args": h.synth_args(arch, quant),
                    "model_sha256": h.sha256_of(path),
                    "tokens": ids,
                    "top_ids": top.astype(int).tolist(),
                    "top_logits": [[round(float(scores[i, j]), 5) for j in row]
                                   for i, row in enumerate(top)],
                }
                h.golden_path(arch, quant).write_text(json.dumps(golden, separators=(",", ":")))
                print(f"{arch} {quant}: {len(ids)} positions, n_vocab {scores.shape[1]}")
                del llm
    return 0


if __name__ == "__main__":
    sys.exit(main())
