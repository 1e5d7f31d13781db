// RoPE vs a double-precision reference of ggml's rope_yarn formulas (normal and NeoX layouts,
// partial rotary dims, linear scaling, YaRN).
#include <cmath>

#include "ops_test_util.h"

namespace t9::test {
namespace {

struct RopeRef {
  double cos, sin, theta;
};

RopeRef rope_ref(const RopeParams& p, int pos, int i0) {
  const double base = p.freq_base, n = p.n_rot;
  const double theta_extrap = pos * std::pow(base, -static_cast<double>(i0) / n);
  const double theta_interp = p.freq_scale * theta_extrap;
  double theta = theta_interp, mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    auto corr = [&](double beta) {
      return n * std::log(p.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(0.0, std::floor(corr(p.beta_fast)));
    const double high = std::min(n - 1, std::ceil(corr(p.beta_slow)));
    const double y = (i0 / 2 - low) / std::max(0.001, high - low);
    const double mix = (1 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
    theta = theta_interp * (1 - mix) + theta_extrap * mix;
    mscale *= 1 + 0.1 * std::log(1.0 / p.freq_scale);
  }
  return {std::cos(theta) * mscale, std::sin(theta) * mscale, theta};
}

void check_rope(const RopeParams& p, int64_t head_dim, bool in_place) {
  auto rng = test_rng();
  CpuBackend be(CpuBackendConfig{2, std::nullopt});
  DeviceArena arena(be);
  const int64_t n_heads = 3, n_tok = 6;
  const auto x = random_floats(rng, n_tok * n_heads * head_dim, -2.0f, 2.0f);
  std::vector<int32_t> pos(n_tok);
  for (auto& v : pos) v = static_cast<int32_t>(rng() % 4000);
  pos[0] = 0;
  Tensor xt = arena.from_host(x, GgmlType::F32, head_dim, n_heads, n_tok);
  Tensor out = in_place ? xt : arena.poisoned(GgmlType::F32, head_dim, n_heads, n_tok);
  be.rope(xt, arena.from_host(pos, GgmlType::I32, n_tok), p, out);
  const auto y = arena.download<float>(out);
  const int half = p.n_rot / 2;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t r = (t * n_heads + h) * head_dim;
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const int a = p.layout == RopeLayout::kNeox ? i0 / 2 : i0;
        const int b = p.layout == RopeLayout::kNeox ? i0 / 2 + half : i0 + 1;
        const RopeRef c = rope_ref(p, pos[t], i0);
        const double x0 = x[r + a], x1 = x[r + b];
        // The kernel builds theta by i0/2 float multiplications (each <= u relative, plus the
        // rounded ratio), so theta is off by up to |theta| * (i0/2 + 6) * u; cos/sin and the
        // rotation add a few roundings of the magnitude.
        const double tol = (std::fabs(x0) + std::fabs(x1)) * std::fabs(c.cos + 2) *
                           (std::fabs(c.theta) * (i0 / 2 + 6) * kU + 8 * kU);
        ASSERT_NEAR(y[r + a], x0 * c.cos - x1 * c.sin, tol) << "t " << t << " i0 " << i0;
        ASSERT_NEAR(y[r + b], x0 * c.sin + x1 * c.cos, tol) << "t " << t << " i0 " << i0;
      }
      for (int64_t i = p.n_rot; i < head_dim; ++i) ASSERT_EQ(y[r + i], x[r + i]);  // pass-through
    }
  }
}

TEST(Rope, NormalLayoutFullRotary) {
  RopeParams p;
  p.layout = RopeLayout::kNormal;
  p.n_rot = 64;
  check_rope(p, 64, /*in_place=*/false);
}

TEST(Rope, NeoxPartialRotaryLinearScalingInPlace) {
  RopeParams p;
  p.layout = RopeLayout::kNeox;
  p.n_rot = 32;
  p.freq_base = 1e6f;
  p.freq_scale = 0.25f;
  check_rope(p, 80, /*in_place=*/true);
}

TEST(Rope, NeoxYarn) {
  RopeParams p;
  p.layout = RopeLayout::kNeox;
  p.n_rot = 128;
  p.freq_base = 1e6f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f;
  p.n_ctx_orig = 4096;
  check_rope(p, 128, /*in_place=*/false);
}

}  // namespace
}  // namespace t9::test
