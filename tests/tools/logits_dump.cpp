// Teacher-forced logits of a GGUF model on the CPU backend, for Python parity tests against peers
// (tests/py/synth): `logits_dump MODEL.gguf OUT.bin ID,ID,...` feeds the ids as one sequence in one
// batch and writes every position's logits as float32, row-major [n_tokens, n_vocab].
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at < s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    ids.push_back(static_cast<int32_t>(std::strtol(s.substr(at, comma - at).c_str(), nullptr, 10)));
    at = comma + 1;
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: logits_dump MODEL.gguf OUT.bin ID,ID,...\n");
    return 2;
  }
  t9::CpuBackend backend;
  auto model = t9::model::Model::load(argv[1], backend);
  if (!model.ok()) {
    std::fprintf(stderr, "logits_dump: %s\n", model.message().c_str());
    return 1;
  }
  const std::vector<int32_t> ids = parse_ids(argv[3]);
  t9::model::Session session(**model);
  auto logits = session.feed(ids, t9::model::LogitRows::kAll);
  if (!logits.ok()) {
    std::fprintf(stderr, "logits_dump: %s\n", logits.message().c_str());
    return 1;
  }
  FILE* f = std::fopen(argv[2], "wb");
  if (!f) {
    std::fprintf(stderr, "logits_dump: cannot create %s\n", argv[2]);
    return 1;
  }
  const size_t n = logits->data.size();
  const bool ok = std::fwrite(logits->data.data(), sizeof(float), n, f) == n;
  if (std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "logits_dump: write failed\n");
    return 1;
  }
  std::printf("%d %d\n", logits->n_rows, logits->n_vocab);
  return 0;
}
