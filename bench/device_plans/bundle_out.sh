#!/usr/bin/env bash
# Packs the subfolders of OUT (the first argument, else $OUT) into OUT/bundle.tar.gz and removes
# them; files at OUT's top stay as they are. Why: the device tool returns at most 8 files a call,
# and runs 252-253 lost the 8B Q4_K_M's logs and llama.cpp's bench.log to that limit. Here:
# `tar xzf bundle.tar.gz` in the call's files folder.
out=${1:-${OUT:-}}
[ -n "$out" ] && cd "$out" 2>/dev/null || exit 0
mapfile -t dirs < <(find . -mindepth 1 -maxdepth 1 -type d -printf '%P\n')
[ "${#dirs[@]}" -gt 0 ] || exit 0
tar czf bundle.tar.gz "${dirs[@]}" && rm -rf "${dirs[@]}"
