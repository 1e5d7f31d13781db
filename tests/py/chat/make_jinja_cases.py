"""Writes tests/data/chat/jinja_cases.json: each engine case with the output of transformers'
own jinja2 environment (or error=true when it raises). Run after editing jinja_cases_src.py;
test_jinja_cases.py checks the file still matches jinja2."""

import json
import pathlib

from jinja_cases_src import CASES

OUT = pathlib.Path(__file__).resolve().parents[2] / "data/chat/jinja_cases.json"


def render(template, context):
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        return {"expected": _compile_jinja_template(template).render(**context)}
    except Exception as e:  # noqa: BLE001
        return {"error": True, "python_error": f"{type(e).__name__}: {e}"}


def build():
    return [{"name": n, "template": t, "context": c, **render(t, c)} for n, t, c in CASES]


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {OUT}")
