#!/usr/bin/env python3
"""Unpacks a folder staged for the device machine, in place (its image has no xz binary).

    python3 scripts/devrun_unpack.py DIR [DIR ...]

For each DIR: DIR/lib.tar.xz (scripts/device_stage.sh packs the shared libraries so) into
DIR/lib, then every DIR/bin/*.xz into its executable. Each archive is removed once unpacked, so a
second run on a warm machine (or a folder staged the old way, with a plain lib/) does nothing.
"""
import lzma
import os
import sys
import tarfile


def unpack(folder: str) -> None:
    libs = os.path.join(folder, "lib.tar.xz")
    if os.path.isfile(libs):
        with tarfile.open(libs) as tar:
            try:
                tar.extractall(folder, filter="data")
            except TypeError:  # a Python without extraction filters (before 3.12 / 3.11.4)
                tar.extractall(folder)
        os.remove(libs)
    bin_dir = os.path.join(folder, "bin")
    if not os.path.isdir(bin_dir):
        return
    for name in sorted(os.listdir(bin_dir)):
        if not name.endswith(".xz"):
            continue
        packed = os.path.join(bin_dir, name)
        target = packed[: -len(".xz")]
        with lzma.open(packed) as src, open(target, "wb") as dst:
            dst.write(src.read())
        os.chmod(target, 0o755)
        os.remove(packed)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for d in sys.argv[1:]:
        unpack(d)
