// The device timeline of every kernel, graphs replaying and PDL on, for measurement:
// TEMPO9_CUDA_TRACE=FILE writes one line per kernel (tab-separated: device start ns, end ns,
// graph id, grid x/y/z, demangled name) and one per CUDA runtime call on the host (its start and
// end in the same clock, graph 0, grid 0 0 0, name "api:" and CUPTI's name for the call) when the
// backend is destroyed. bench/kernel_trace.py turns it into each kernel's share of a step's chain
// (its end minus the previous kernel's end) and, with --timeline, a step's host calls against
// the device's work: where the device waits for the host.
//
// Why not the other tools: ncu serializes kernels and times each alone (a 2 µs norm reads as
// 5 µs), and TEMPO9_CUDA_PROFILE's event pairs turn graphs and PDL off. A decision about a
// fusion needs the chain as it runs. The records come from CUPTI's activity API
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which covers kernels inside graph launches);
// libcupti is opened at run time (TEMPO9_CUPTI_LIB, else the CUDA install's usual paths), so no
// binary links it and nothing extra travels to the device.
#pragma once

#include <memory>
#include <string>

namespace t9::cuda {

class KernelTrace {
 public:
  // nullptr unless TEMPO9_CUDA_TRACE names a file (and CUPTI loads: otherwise a warning).
  static std::unique_ptr<KernelTrace> from_env();
  ~KernelTrace();  // flushes CUPTI's buffers and writes the file
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

 private:
  explicit KernelTrace(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace t9::cuda
