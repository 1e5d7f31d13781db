# Sourced by the device plans (bench/device_plans/*.sh), run there from the repository root with
# .devrun carried (scripts/device_stage.sh): the log in $OUT/log.txt, the staged binaries and the
# tokenizer unpacked, the library path and the fixtures' directory set. Sets ROOT, T0, TOK, T9.
set -u
ROOT=$PWD
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$SECONDS
export TOK=$ROOT/.devrun/shared/fixtures/tokenizers/qwen3/tokenizer.json
python3 -c "import lzma; open('$TOK','wb').write(lzma.open('$TOK.xz').read())"
export LD_LIBRARY_PATH=$ROOT/.devrun/lib
export TEMPO9_SHARED_DIR=$ROOT/.devrun/shared
T9=$ROOT/.devrun/bin/tempo9
for f in .devrun/bin/*.xz; do
  python3 -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f"
  chmod +x "${f%.xz}" && rm "$f"
done
