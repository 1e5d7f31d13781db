"""Qwen3's tokenizer.json: our ids == Hugging Face `tokenizers` ids, live, on every corpus text."""
import sys
import unicodedata

import pytest
from tokenizers import Tokenizer

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import tok_helpers as h  # noqa: E402

SOURCE = ["--tokenizer-json", str(h.QWEN3_JSON)]


def special_texts(hf):
    """One text with every added token, and each alone, besides the corpus."""
    added = [t.content for t in hf.get_added_tokens_decoder().values()]
    return [{"name": "all_added", "text": " x ".join(added)}] + [
        {"name": f"added:{t}", "text": f"a{t}b"} for t in added]


def compare(hf, entries, no_special):
    hf.encode_special_tokens = no_special  # HF's switch for treating special strings as text
    want = [hf.encode(e["text"], add_special_tokens=True).ids for e in entries]
    got = h.tokenize_batch(SOURCE, [e["text"] for e in entries], no_special=no_special)
    return [(e["name"], w, g) for e, w, g in zip(entries, want, got) if w != g]


@pytest.mark.parametrize("no_special", [False, True])
def test_qwen3_ids_match_hf(no_special):
    hf = Tokenizer.from_file(str(h.QWEN3_JSON))
    entries = h.corpus() + special_texts(hf)
    mismatches = compare(hf, entries, no_special)
    print(f"qwen3: {len(entries)} texts, {len(mismatches)} mismatches (no_special={no_special})")
    for name, want, got in mismatches[:5]:
        print(f"  {name}: hf={want[:40]} ours={got[:40]}")
    assert not mismatches


def test_qwen3_decode_matches_hf():
    """Whole and streamed decoding give HF's text; it is the input again except where NFC changed it."""
    hf = Tokenizer.from_file(str(h.QWEN3_JSON))
    entries = h.corpus()
    id_lists = [hf.encode(e["text"]).ids for e in entries]
    got = h.detokenize_batch(SOURCE, id_lists)
    for e, ids, (whole, streamed) in zip(entries, id_lists, got):
        want = hf.decode(ids, skip_special_tokens=False).encode()
        assert whole == want, e["name"]
        assert streamed == want, e["name"]
        if unicodedata.normalize("NFC", e["text"]) == e["text"]:
            assert whole == e["text"].encode(), e["name"]
