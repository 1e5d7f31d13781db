// KernelTrace (contract in cuda_trace.cuh): CUPTI activity records of every kernel, loaded with
// dlopen so that only a traced run needs libcupti.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_trace.cuh"

#include <fmt/format.h>

#include <cstdlib>

#include "core/log.h"

#if __has_include(<cupti.h>)  // the CUDA toolkit's; a build without it cannot trace
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <type_traits>
#include <vector>

namespace t9::cuda {
namespace {

// One kernel's record, copied out of CUPTI's buffer (its name pointer stays valid: CUPTI owns
// the strings for the process's lifetime). A runtime API call (the host side: when a graph
// launch or a synchronization was called and returned) has name nullptr and its callback id.
struct KernelRecord {
  uint64_t start, end;
  uint32_t graph;
  int32_t grid[3];
  const char* name;
  uint32_t cbid = 0;
};

// The CUPTI entry points (from libcupti, opened at run time).
struct Cupti {
  void* lib = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;  // optional
};

// CUPTI's callbacks are plain functions: the process's one trace keeps its state here.
Cupti g_cupti;
std::mutex g_mu;
std::vector<KernelRecord> g_records;
constexpr size_t kBufferBytes = size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* rec = nullptr;
    while (g_cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        g_records.push_back({a->start, a->end, 0, {0, 0, 0}, nullptr, a->cbid});
        continue;
      }
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      g_records.push_back({k->start, k->end, k->graphId, {k->gridX, k->gridY, k->gridZ}, k->name});
    }
  }
  std::free(buffer);
}

// libcupti from TEMPO9_CUPTI_LIB when set (only there), else the first of the loader's path and
// the CUDA install's usual places that opens (the H200 machine's CUDA 13.0 has it under
// targets/; its nsight-compute copies are CUPTI 10-12, which open but do not start with the CUDA
// 13 driver: run 186). A library that opened is kept (unloading one that may have started
// threads is not safe), so a failed start is not retried with another.
bool load_cupti() {
  std::vector<std::string> paths;
  if (const char* e = std::getenv("TEMPO9_CUPTI_LIB"); e != nullptr && *e != '\0') {
    paths.emplace_back(e);
  } else {
    for (const char* p : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                          "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
                          "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13",
                          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
      paths.emplace_back(p);
  }
  for (const std::string& p : paths) {
    g_cupti.lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (g_cupti.lib != nullptr) break;
  }
  if (g_cupti.lib == nullptr) return false;
  const auto sym = [](const char* name, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(g_cupti.lib, name));
    return fn != nullptr;
  };
  (void)sym("cuptiGetCallbackName", g_cupti.callback_name);
  return sym("cuptiActivityRegisterCallbacks", g_cupti.register_callbacks) &&
         sym("cuptiActivityEnable", g_cupti.enable) &&
         sym("cuptiActivityDisable", g_cupti.disable) &&
         sym("cuptiActivityGetNextRecord", g_cupti.next_record) &&
         sym("cuptiActivityFlushAll", g_cupti.flush_all);
}

std::string demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return s;
}

// "api:cudaGraphLaunch_v10000" (CUPTI's name for the runtime call), or its callback id.
std::string api_name(uint32_t cbid) {
  const char* name = nullptr;
  if (g_cupti.callback_name == nullptr ||
      g_cupti.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS ||
      name == nullptr)
    return fmt::format("api:cbid_{}", cbid);
  return fmt::format("api:{}", name);
}

}  // namespace

std::unique_ptr<KernelTrace> KernelTrace::from_env() {
  const char* path = std::getenv("TEMPO9_CUDA_TRACE");
  if (path == nullptr || *path == '\0') return nullptr;
  if (g_cupti.lib != nullptr) {
    log_line(LogLevel::kWarn, "TEMPO9_CUDA_TRACE: one traced backend per process; not tracing");
    return nullptr;
  }
  if (!load_cupti() ||
      g_cupti.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      g_cupti.enable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS) {
    log_line(LogLevel::kWarn,
             "TEMPO9_CUDA_TRACE: libcupti did not load or start (set "
             "TEMPO9_CUPTI_LIB to its path); not tracing");
    return nullptr;
  }
  return std::unique_ptr<KernelTrace>(new KernelTrace(path));
}

KernelTrace::~KernelTrace() {
  (void)cudaDeviceSynchronize();
  g_cupti.flush_all(1);  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also the buffers still filling
  (void)g_cupti.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  (void)g_cupti.disable(CUPTI_ACTIVITY_KIND_RUNTIME);
  std::lock_guard<std::mutex> lock(g_mu);
  std::FILE* f = std::fopen(path_.c_str(), "w");
  if (f == nullptr) {
    log_line(LogLevel::kWarn, fmt::format("TEMPO9_CUDA_TRACE: cannot write {}", path_));
    return;
  }
  std::fputs("start_ns\tend_ns\tgraph\tgrid_x\tgrid_y\tgrid_z\tname\n", f);
  size_t kernels = 0;
  for (const KernelRecord& r : g_records) {
    kernels += r.name != nullptr;
    std::fprintf(f, "%llu\t%llu\t%u\t%d\t%d\t%d\t%s\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.graph, r.grid[0], r.grid[1], r.grid[2],
                 r.name != nullptr ? demangled(r.name).c_str() : api_name(r.cbid).c_str());
  }
  std::fclose(f);
  log_line(LogLevel::kInfo, fmt::format("TEMPO9_CUDA_TRACE: {} kernels and {} runtime calls "
                                        "written to {}",
                                        kernels, g_records.size() - kernels, path_));
  g_records.clear();
}

}  // namespace t9::cuda

#else  // no cupti.h

namespace t9::cuda {

std::unique_ptr<KernelTrace> KernelTrace::from_env() {
  if (const char* path = std::getenv("TEMPO9_CUDA_TRACE"); path != nullptr && *path != '\0')
    log_line(LogLevel::kWarn, "TEMPO9_CUDA_TRACE: built without CUPTI's headers; not tracing");
  return nullptr;
}

KernelTrace::~KernelTrace() = default;

}  // namespace t9::cuda

#endif
