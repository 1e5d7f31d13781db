// tempo9 synth (model/synth): every tiny preset loads in our loader and runs; files are a pure
// function of (arguments, seed); the quant mix follows llama.cpp's rules; the real-shape presets
// have the published parameter counts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "model/synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace t9::synth {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("synth_test_" + name)).string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

SynthOptions tiny(const std::string& arch, SynthQuant q, uint64_t seed) {
  SynthOptions opt;
  auto shape = preset_shape(arch, "tiny");
  EXPECT_TRUE(shape.ok()) << shape.message();
  if (shape.ok()) opt.shape = *shape;
  opt.quant = q;
  opt.seed = seed;
  return opt;
}

std::string write_tiny(const std::string& arch, SynthQuant q, uint64_t seed, int threads = 0) {
  SynthOptions opt = tiny(arch, q, seed);
  opt.n_threads = threads;
  const std::string path =
      temp_path(fmt::format("{}_{}_{}_{}.gguf", arch, quant_name(q), seed, threads));
  Status st = write_synth_gguf(opt, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

CpuBackend& backend() {
  static CpuBackend b;
  return b;
}

// Loads the file, checks the layer kinds the preset promises, and runs 40 tokens in one batch:
// every logit finite and the rows not constant (a broken layer tends to give NaN or zeros).
void check_loads_and_runs(const std::string& arch, SynthQuant q) {
  SCOPED_TRACE(arch + " " + std::string(quant_name(q)));
  const std::string path = write_tiny(arch, q, 3);
  auto m = model::Model::load(path, backend());
  ASSERT_TRUE(m.ok()) << m.message();
  const model::HParams& hp = (*m)->hparams();
  const SynthShape shape = tiny(arch, q, 3).shape;
  EXPECT_EQ(hp.n_layer, shape.n_layer);
  EXPECT_EQ(hp.n_vocab, shape.n_vocab);
  int n_recurrent = 0;
  for (const auto& l : (*m)->spec().layers) n_recurrent += l.recurrent ? 1 : 0;
  if (shape.is_hybrid()) {
    EXPECT_GE(n_recurrent, 2);               // several Gated DeltaNet layers
    EXPECT_GE(hp.n_layer - n_recurrent, 1);  // and at least one gated-attention layer
  } else {
    EXPECT_EQ(n_recurrent, 0);
  }
  if (arch == "qwen3next" || arch == "qwen35moe") {
    EXPECT_GT(hp.n_ff_shexp, 0);  // MoE with a shared expert
  }
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % 300);
  model::Session s(**m);
  auto logits = s.feed(ids, model::LogitRows::kAll);
  ASSERT_TRUE(logits.ok()) << logits.message();
  ASSERT_EQ(logits->n_rows, 40);
  for (int r = 0; r < logits->n_rows; ++r) {
    double sum = 0, sum2 = 0;
    for (float x : logits->row(r)) {
      ASSERT_TRUE(std::isfinite(x)) << "row " << r;
      sum += x, sum2 += double{x} * x;
    }
    const double var = sum2 / hp.n_vocab - (sum / hp.n_vocab) * (sum / hp.n_vocab);
    // Unit-scale output rows over unit-rms hidden states: logits have std ~1.
    EXPECT_GT(var, 0.1) << "row " << r;
    EXPECT_LT(var, 100.0) << "row " << r;
  }
  std::filesystem::remove(path);
}

TEST(Synth, EveryTinyPresetLoadsAndRunsAtQ4KM) {
  for (std::string_view arch : synth_archs())
    check_loads_and_runs(std::string(arch), SynthQuant::Q4_K_M);
}

TEST(Synth, TinyPresetsLoadAtEveryOtherQuant) {
  // One dense and one hybrid MoE family cover every tensor kind at every type.
  for (SynthQuant q :
       {SynthQuant::F32, SynthQuant::F16, SynthQuant::BF16, SynthQuant::Q8_0, SynthQuant::Q4_0,
        SynthQuant::Q6_K, SynthQuant::Q3_K_M, SynthQuant::Q5_K_M}) {
    check_loads_and_runs("qwen3", q);
    check_loads_and_runs("qwen35moe", q);
  }
}

TEST(Synth, SameSeedSameBytesWhateverTheThreadCount) {
  const std::string a = write_tiny("qwen3next", SynthQuant::Q4_K_M, 7, 1);
  const std::string b = write_tiny("qwen3next", SynthQuant::Q4_K_M, 7, 2);
  const auto ba = read_all(a), bb = read_all(b);
  ASSERT_FALSE(ba.empty());
  EXPECT_TRUE(ba == bb);
  // The size is what --dry-run predicts.
  auto sum = summarize(tiny("qwen3next", SynthQuant::Q4_K_M, 7));
  ASSERT_TRUE(sum.ok()) << sum.message();
  EXPECT_EQ(ba.size(), sum->file_bytes);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Synth, DifferentSeedDifferentWeights) {
  const std::string a = write_tiny("llama", SynthQuant::Q8_0, 1);
  const std::string b = write_tiny("llama", SynthQuant::Q8_0, 2);
  const auto ba = read_all(a), bb = read_all(b);
  ASSERT_EQ(ba.size(), bb.size());  // same layout
  // Count differing bytes: only the data section may differ, and nearly all of it does.
  size_t n_diff = 0;
  for (size_t i = 0; i < ba.size(); ++i) n_diff += ba[i] != bb[i];
  EXPECT_GT(n_diff, ba.size() / 2);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Synth, TokenizerAndChatTemplateLoad) {
  const std::string path = write_tiny("qwen3", SynthQuant::Q8_0, 1);
  auto tok = tok::Tokenizer::from_gguf_file(path);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->n_tokens(), 512u);
  const std::string text = "<|im_start|>user\nthe cat, and 12 (of them)!<|im_end|>\n";
  auto ids = tok->encode(text);
  ASSERT_TRUE(ids.ok()) << ids.message();
  EXPECT_EQ((*ids)[0], tok->find("<|im_start|>"));
  EXPECT_NE(std::find(ids->begin(), ids->end(), tok->find("Ġthe")), ids->end());  // a merge
  auto back = tok->decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
  EXPECT_TRUE(tok->is_eog(tok->find("<|im_end|>")));
  auto f = gguf::GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->find("tokenizer.chat_template") != nullptr);
  std::filesystem::remove(path);
}

const TensorPlan* find(const std::vector<TensorPlan>& plan, const std::string& name) {
  for (const TensorPlan& t : plan)
    if (t.name == name) return &t;
  return nullptr;
}

GgmlType type_of(const std::vector<TensorPlan>& plan, const std::string& name) {
  const TensorPlan* t = find(plan, name);
  EXPECT_NE(t, nullptr) << name;
  return t ? t->type : GgmlType::F32;
}

// Expected types worked out by hand from llama.cpp's llama_tensor_get_type_impl for 36 layers:
// use_more_bits(i, 36) = i < 4 || i >= 31 || (i - 4) % 3 == 2.
TEST(Synth, Q4KMMixFollowsLlamaCpp) {
  SynthOptions opt;
  opt.shape = *preset_shape("", "qwen3-8b");
  opt.quant = SynthQuant::Q4_K_M;
  auto s = summarize(opt);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto& p = s->tensors;
  EXPECT_EQ(type_of(p, "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(p, "token_embd.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(p, "blk.0.attn_v.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(p, "blk.4.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(p, "blk.6.attn_v.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(p, "blk.31.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(p, "blk.30.ffn_down.weight"), GgmlType::Q6_K);  // (30 - 4) % 3 == 2
  EXPECT_EQ(type_of(p, "blk.29.ffn_down.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(p, "blk.5.ffn_up.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(p, "blk.5.attn_norm.weight"), GgmlType::F32);

  // Q3_K_M: attn_v Q5_K for the first two, then Q4_K; ffn_down Q5_K below n/16 (= 2), else Q4_K;
  // attn_output Q4_K; the rest Q3_K.
  opt.quant = SynthQuant::Q3_K_M;
  s = summarize(opt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(type_of(s->tensors, "blk.1.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "blk.2.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(s->tensors, "blk.1.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "blk.2.ffn_down.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(s->tensors, "blk.9.attn_output.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(s->tensors, "blk.9.attn_q.weight"), GgmlType::Q3_K);
  EXPECT_EQ(type_of(s->tensors, "output.weight"), GgmlType::Q6_K);

  // Q5_K_M: Q4_K_M's use_more_bits rules to Q6_K, the rest Q5_K (llama_ftype 17).
  opt.quant = SynthQuant::Q5_K_M;
  s = summarize(opt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(type_of(s->tensors, "blk.0.attn_v.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(s->tensors, "blk.4.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "blk.30.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(s->tensors, "blk.29.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "blk.9.attn_output.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "blk.9.ffn_gate.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "token_embd.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of(s->tensors, "output.weight"), GgmlType::Q6_K);
}

// MoE: routers stay F32; the expert stacks follow the per-layer ffn_down rule (layer from name).
TEST(Synth, MoeMixKeepsRoutersF32) {
  SynthOptions opt;
  opt.shape = *preset_shape("qwen35moe", "qwen3.5-35b-a3b");
  opt.quant = SynthQuant::Q4_K_M;
  auto s = summarize(opt);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(type_of(s->tensors, "blk.0.ffn_gate_inp.weight"), GgmlType::F32);
  EXPECT_EQ(type_of(s->tensors, "blk.0.ffn_gate_inp_shexp.weight"), GgmlType::F32);
  EXPECT_EQ(type_of(s->tensors, "blk.0.ssm_conv1d.weight"), GgmlType::F32);
  // use_more_bits(i, 40): i < 5 || i >= 35 || (i - 5) % 3 == 2.
  EXPECT_EQ(type_of(s->tensors, "blk.7.ffn_down_exps.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(s->tensors, "blk.8.ffn_down_exps.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of(s->tensors, "blk.7.ffn_down_shexp.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of(s->tensors, "blk.8.ffn_gate_exps.weight"), GgmlType::Q4_K);
}

// Parameter counts of the real models as their model cards state them; 1% covers rounding of
// the published figures (and the MTP block the Qwen3.5 preset leaves out, see docs/SYNTH.md).
TEST(Synth, RealPresetsHaveThePublishedParameterCounts) {
  struct Want {
    const char* preset;
    double params;
  };
  const Want wants[] = {
      {"qwen3-8b", 8.19e9},       // Qwen3-8B: 8.2B (6.95B non-embedding)
      {"llama-3.1-8b", 8.03e9},   // Llama 3.1 8B: 8.03B
      {"qwen3-30b-a3b", 30.5e9},  // Qwen3-30B-A3B: 30.5B
      {"qwen3.5-35b-a3b", 35e9},  // Qwen3.5-35B-A3B: 35B
  };
  std::vector<std::string> names = preset_names();
  EXPECT_EQ(names.size(), std::size(wants) + 1);  // + tiny
  for (const Want& w : wants) {
    SCOPED_TRACE(w.preset);
    EXPECT_NE(std::find(names.begin(), names.end(), w.preset), names.end());
    auto shape = preset_shape("", w.preset);
    ASSERT_TRUE(shape.ok()) << shape.message();
    SynthOptions opt;
    opt.shape = *shape;
    opt.quant = SynthQuant::BF16;
    auto s = summarize(opt);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_NEAR(static_cast<double>(s->n_params), w.params, 0.01 * w.params);
  }
}

// A nested Qwen3.5-MoE style config.json (text_config) gives the hybrid MoE shape it describes.
TEST(Synth, ShapeFromHfConfig) {
  const std::string path = temp_path("config.json");
  std::ofstream(path) << R"({"model_type": "qwen3_5_moe", "text_config": {
    "num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 1000,
    "rope_parameters": {"rope_theta": 5000000, "partial_rotary_factor": 0.25},
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
    "shared_expert_intermediate_size": 256, "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
    "linear_num_key_heads": 2, "linear_num_value_heads": 8}})";
  auto s = shape_from_hf_config("qwen35moe", path);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->n_layer, 8);
  EXPECT_EQ(s->n_embd, 512);
  EXPECT_EQ(s->head_dim, 128);
  EXPECT_EQ(s->n_rot, 32);
  EXPECT_EQ(s->n_vocab, 1000);
  EXPECT_EQ(s->rope_freq_base, 5000000.0f);
  EXPECT_EQ(s->n_expert, 8);
  EXPECT_EQ(s->n_ff_shexp, 256);
  EXPECT_EQ(s->ssm_dt_rank, 8);
  EXPECT_TRUE(s->is_recurrent(2));
  EXPECT_FALSE(s->is_recurrent(3));
  // Written and loaded: 6 Gated DeltaNet and 2 attention layers, the config's vocabulary.
  SynthOptions opt;
  opt.shape = *s;
  opt.quant = SynthQuant::Q8_0;
  const std::string gguf = temp_path("config.gguf");
  ASSERT_TRUE(write_synth_gguf(opt, gguf).ok());
  auto m = model::Model::load(gguf, backend());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ((*m)->n_vocab(), 1000);
  EXPECT_EQ((*m)->spec().n_kv_layers, 2);
  std::filesystem::remove(path);
  std::filesystem::remove(gguf);
}

TEST(Synth, BadArgumentsAreErrors) {
  EXPECT_FALSE(preset_shape("llama", "qwen3-8b").ok());  // preset of another arch
  EXPECT_FALSE(preset_shape("mamba", "tiny").ok());      // unsupported arch
  EXPECT_FALSE(preset_shape("llama", "huge").ok());      // unknown preset
  EXPECT_FALSE(quant_from_name("Q2_K").ok());
  SynthOptions opt = tiny("llama", SynthQuant::Q8_0, 1);
  opt.shape.n_vocab = 100;  // below the tokenizer's tokens
  EXPECT_FALSE(summarize(opt).ok());
  opt.shape.n_vocab = 512;
  opt.shape.n_head_kv = 3;  // 4 heads are not a multiple of 3
  EXPECT_FALSE(summarize(opt).ok());
  EXPECT_FALSE(shape_from_hf_config("qwen3", "/nonexistent/config.json").ok());
}

}  // namespace
}  // namespace t9::synth
