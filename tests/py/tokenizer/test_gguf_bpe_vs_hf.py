"""Second reference for the byte-level BPE GGUF vocabs (SmolLM2, Qwen2.5): an HF `tokenizers`
Tokenizer assembled live from the GGUF metadata (read with gguf-py) and the pre-tokenizer each
model's own tokenizer.json declares, compared with ours on every corpus text."""
import sys

import gguf
import pytest
from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import tok_helpers as h  # noqa: E402

# From the models' tokenizer.json files on the Hugging Face Hub (not from our code).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE = {
    "smollm2": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
    "qwen2.5": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
}


# llama.cpp (llama-vocab.cpp, "control-looking token ... its type will be overridden") makes
# these texts control tokens whatever the GGUF type; Qwen2.5 has "</s>" as a normal token. HF has
# no such rule, so the reference is told explicitly.
LLAMACPP_CONTROL_TEXTS = {"</s>", "<|endoftext|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_suffix|>",
                          "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}


def hf_from_gguf(path, pre):
    fields = gguf.GGUFReader(str(path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"].contents()]
    tk = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tk.pre_tokenizer = pre()
    # Control (3) tokens are special; user-defined (4) are plain added tokens.
    types = [3 if tokens[i] in LLAMACPP_CONTROL_TEXTS else t for i, t in enumerate(types)]
    tk.add_tokens([AddedToken(tokens[i], special=(t == 3), normalized=False)
                   for i, t in enumerate(types) if t in (3, 4)])
    return tk, [tokens[i] for i, t in enumerate(types) if t in (3, 4)]


@pytest.mark.parametrize("name", ["smollm2", "qwen2.5"])
def test_gguf_bpe_matches_hf(name):
    path = h.model_path(name)
    hf, specials = hf_from_gguf(path, PRE[name])
    entries = h.corpus() + [{"name": "all_specials", "text": " ".join(specials)}]
    texts = [e["text"] for e in entries]
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = h.tokenize_batch(["--model", str(path)], texts, no_bos=True)
    bad = [(e["name"], w, g) for e, w, g in zip(entries, want, got) if w != g]
    print(f"{name} vs HF-from-GGUF: {len(entries)} texts, {len(bad)} mismatches")
    for n, w, g in bad[:5]:
        print(f"  {n}: hf={w[:30]} ours={g[:30]}")
    assert not bad
