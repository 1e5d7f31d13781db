"""Each real GGUF vocab vs llama.cpp's tokenizer: golden ids from scripts/golden_tokenizer.py
(llama-cpp-python, vocab_only) in tests/data/tokenizer/<model>.json, 0 mismatches required."""
import json
import sys

import pytest

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import tok_helpers as h  # noqa: E402


@pytest.mark.parametrize("name", ["smollm2", "gemma3", "qwen2.5"])
def test_gguf_ids_match_llamacpp(name):
    golden = json.loads((h.DATA / f"{name}.json").read_text(encoding="utf-8"))
    assert golden["model"] == h.MODELS[name]
    source = ["--model", str(h.model_path(name))]
    cases = golden["cases"]
    mismatches = []
    for add_bos, special in ((True, True), (False, False)):
        group = [c for c in cases if c["add_bos"] == add_bos and c["special"] == special]
        assert group, f"no golden cases for add_bos={add_bos} special={special}"
        got = h.tokenize_batch(source, [c["text"] for c in group], no_special=not special,
                               no_bos=not add_bos)
        mismatches += [(c, g) for c, g in zip(group, got) if g != c["ids"]]
    print(f"{name}: {len(cases)} cases, {len(mismatches)} mismatches vs {golden['peer']}")
    for c, g in mismatches[:5]:
        print(f"  {c['name']} add_bos={c['add_bos']} special={c['special']}:\n"
              f"    llama.cpp={c['ids'][:24]}\n    ours     ={g[:24]}")
    assert not mismatches
