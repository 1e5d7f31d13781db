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

# One 8-agent run of the 35B file through h200_bench.sh (the plan sets S35 and M): tag, then
# extra environment (VAR=value ...). Prints the TTFT / ITL / throughput line, the breakdown and
# the server log's graph, error and warm-up lines.
agents() {
  local tag=$1
  shift
  # shellcheck disable=SC2086,SC2154  # S35: word-split on purpose; S35, M: the plan's
  env "$@" $S35 AGENTS=8 MODEL=$M OUT=/tmp/agents_$tag bash bench/h200_bench.sh agents >/dev/null 2>&1
  echo "agents $tag: $(grep -E 'turn 1 TTFT p50|turn 2 TTFT p50|turn 3 TTFT p50|ITL p50|wall s|effective tok/s' /tmp/agents_$tag/agents_tempo9.txt | tr '\n' ' ')"
  cat /tmp/agents_$tag/agents_breakdown_tempo9.txt
  grep -E "cuda graphs|error|warm-up" /tmp/agents_$tag/serve_agents_tempo9.log | tail -3
}
