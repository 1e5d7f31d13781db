// AMX-BF16 peak on one core: 4 independent 16x16 fp32 C tiles, each tdpbf16ps a 16x16x32 product
// (A, B in bf16), so the tile unit is never waiting on a result. The ceiling an AMX-BF16
// attention would work under (dev/kernels/README.md, "Attention tasks"); CPU time per op.
// Build: g++ -O2 -mamx-tile -mamx-bf16 dev/kernels/amx_bf16_peak.cpp -o /tmp/amx_bf16_peak
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
static double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
int main() {
  if (syscall(SYS_arch_prctl, 0x1023 /*ARCH_REQ_XCOMP_PERM*/, 18 /*XFEATURE_XTILEDATA*/)) {
    puts("no AMX");
    return 1;
  }
  // Palette 1, eight tiles of 16 rows x 64 bytes (written byte by byte: see matmul_amx.cpp).
  alignas(64) volatile uint8_t cfgb[64] = {};
  cfgb[0] = 1;
  for (int t = 0; t < 8; t++) cfgb[16 + 2 * t] = 64, cfgb[48 + t] = 16;
  alignas(64) uint8_t cfg[64];
  for (int i = 0; i < 64; i++) cfg[i] = cfgb[i];
  _tile_loadconfig(cfg);
  alignas(64) static uint16_t A[16 * 32], B[16 * 32];
  alignas(64) static float C[16 * 16];
  for (int i = 0; i < 16 * 32; i++) {
    A[i] = 0x3f80;
    B[i] = 0x3c00;
  }
  _tile_loadd(4, A, 64);
  _tile_loadd(5, B, 64);
  _tile_loadd(6, A, 64);
  _tile_loadd(7, B, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const long N = 20000000;
  double t0 = cpu_s();
  for (long i = 0; i < N; i++) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 6, 5);
    _tile_dpbf16ps(3, 6, 7);
  }
  double t = cpu_s() - t0;
  _tile_stored(0, C, 64);
  double macs = double(N) * 4 * 16 * 16 * 32;
  printf("tdpbf16ps: %.2f ns each, %.0f GMAC/s (%.0f GFLOP/s) per core; C[0]=%g\n",
         t / (N * 4) * 1e9, macs / t * 1e-9, 2 * macs / t * 1e-9, C[0]);
  _tile_release();
}
