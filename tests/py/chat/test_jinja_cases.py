"""The expected strings the C++ engine tests use (tests/data/chat/jinja_cases.json) are what
transformers' jinja2 environment renders today."""

import json

from make_jinja_cases import OUT, build


def test_cases_file_matches_jinja2():
    on_disk = json.loads(OUT.read_text())
    live = build()
    assert [c["name"] for c in on_disk] == [c["name"] for c in live]
    for disk, ref in zip(on_disk, live):
        assert disk.get("expected") == ref.get("expected"), disk["name"]
        assert disk.get("error", False) == ref.get("error", False), disk["name"]
    print(f"jinja_cases.json: {len(live)} cases match jinja2")
