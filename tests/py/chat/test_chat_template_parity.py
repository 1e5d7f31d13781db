"""`tempo9 template` must render byte-identically to transformers' apply_chat_template.

The reference is computed live: a PreTrainedTokenizerFast carrying the template and the model's
special tokens, rendered with apply_chat_template(tokenize=False), which normalizes messages and
renders through transformers' own sandboxed jinja2 environment. Cases where transformers raises
must make `tempo9 template` fail too.
"""

import json
import os
import pathlib
import subprocess

import pytest

from chat_cases import KWARGS_VARIANTS, conversations

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("TEMPO9_SHARED_DIR", ROOT.parent / "shared"))
MODELS = pathlib.Path(os.environ.get("TEMPO9_MODELS", pathlib.Path.home() / ".cache/tempo9/models"))


def tempo9_bin():
    """TEMPO9_BIN, else build/tempo9, else the development build dir (the first that has `template`)."""
    env = os.environ.get("TEMPO9_BIN")
    if env:
        return env
    for cand in (ROOT / "build/tempo9", ROOT / "build-jinja/tempo9"):
        if cand.exists() and b"template" in subprocess.run([str(cand), "--help"], capture_output=True).stdout:
            return str(cand)
    pytest.fail("no tempo9 binary with the `template` command: set TEMPO9_BIN or build it")


def gguf_template(path):
    """The chat template and special-token strings of a GGUF, read with the gguf package."""
    import gguf

    if not path.exists():
        pytest.fail(f"model missing: {path} (scripts/test.sh fetches it)")
    r = gguf.GGUFReader(str(path))

    def field_str(key):
        f = r.fields.get(key)
        return None if f is None else bytes(f.parts[f.data[0]]).decode()

    tokens = r.fields["tokenizer.ggml.tokens"]
    special = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                      ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
        f = r.fields.get("tokenizer.ggml." + key)
        if f is not None:
            idx = int(f.parts[f.data[0]][0])
            special[name] = bytes(tokens.parts[tokens.data[idx]]).decode()
    return field_str("tokenizer.chat_template"), special


def make_tokenizer(template, special):
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(BPE()), **special)
    tok.chat_template = template
    return tok


def reference(tok, messages, tools, add_generation_prompt, kwargs):
    try:
        return tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **kwargs)
    except Exception as e:  # noqa: BLE001 - any template error must be an error for us too
        return e


TEMPLATES = {
    "SmolLM2-135M-Instruct": ("model", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "qwen2.5-coder-1.5b-instruct": ("model", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    "qwen3.jinja": ("template", "qwen3.jinja"),
    "qwen3-coder.jinja": ("template", "qwen3-coder.jinja"),
}


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_template_parity(name, tmp_path):
    kind, file = TEMPLATES[name]
    if kind == "model":
        path = MODELS / file
        template, special = gguf_template(path)
        source_args = ["--model", str(path)]
    else:
        path = SHARED / "fixtures/templates" / file
        template, special = path.read_text(), {}
        source_args = ["--template", str(path)]

    tok = make_tokenizer(template, special)
    binary = tempo9_bin()
    n_cases, n_raised, mismatches = 0, 0, []
    for conv_name, messages, tools in conversations():
        for kw_name, kwargs in KWARGS_VARIANTS:
            for agp in (True, False):
                case = f"{conv_name}/{kw_name}/{'gen' if agp else 'nogen'}"
                expected = reference(tok, messages, tools, agp, kwargs)
                (tmp_path / "m.json").write_text(json.dumps(messages, ensure_ascii=False))
                args = [binary, "template", *source_args, "--messages", str(tmp_path / "m.json"),
                        "--kwargs", json.dumps(kwargs)]
                if tools is not None:
                    (tmp_path / "t.json").write_text(json.dumps(tools))
                    args += ["--tools", str(tmp_path / "t.json")]
                if not agp:
                    args.append("--no-generation-prompt")
                proc = subprocess.run(args, capture_output=True)
                n_cases += 1
                if isinstance(expected, Exception):
                    n_raised += 1
                    if proc.returncode == 0:
                        mismatches.append(f"{case}: transformers raised {expected!r}, tempo9 rendered")
                    continue
                got = proc.stdout.decode("utf-8", errors="replace")
                if proc.returncode != 0 or got != expected:
                    mismatches.append(f"{case}: rc={proc.returncode} stderr={proc.stderr.decode()!r}\n"
                                      f"  expected={expected!r}\n  got     ={got!r}")
    print(f"{name}: {n_cases} cases, {len(mismatches)} mismatches ({n_raised} cases where both raise)")
    assert not mismatches, "\n".join(mismatches[:5])
