# CUDA is optional. AUTO builds it whenever nvcc is on PATH — also on machines without a GPU, so
# CI keeps the CUDA code compiling. Targets Hopper only: sm_90 and sm_90a (wgmma, TMA).
set(TEMPO9_CUDA_ENABLED OFF)
# The device code built: both by default (sm_90a for the wgmma kernels, plain sm_90 beside it).
# A build for the H100 / H200 alone may keep sm_90a only (the runtime takes it there: the wgmma
# GEMM, empty in the sm_90 code, runs), which lets a device call carry more binaries.
set(TEMPO9_CUDA_GENCODE "-gencode=arch=compute_90a,code=sm_90a;-gencode=arch=compute_90,code=sm_90"
    CACHE STRING "nvcc -gencode flags for the CUDA backend (a list)")
# Source lines in the device code, for ncu's source view; they do not change the code. Without
# them (and with sm_90a only) a device call's staged binaries are ~5x smaller (device_stage.sh).
option(TEMPO9_CUDA_LINEINFO "nvcc -lineinfo" ON)
if(NOT TEMPO9_CUDA STREQUAL "OFF")
  find_program(TEMPO9_NVCC nvcc)
  if(TEMPO9_NVCC)
    set(CMAKE_CUDA_COMPILER ${TEMPO9_NVCC})
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    # CMake 3.25 knows nvcc's dialect flags only up to C++17; nvcc 13 takes -std=c++20.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TEMPO9_CUDA_ENABLED ON)
  elseif(TEMPO9_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TEMPO9_CUDA=ON but nvcc was not found")
  endif()
endif()
message(STATUS "Tempo9 CUDA backend: ${TEMPO9_CUDA_ENABLED}")

function(tempo9_cuda_module)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
  if(NOT srcs)
    return()
  endif()
  add_library(tempo9_cuda STATIC ${srcs})
  set_target_properties(tempo9_cuda PROPERTIES CUDA_STANDARD 20 CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(tempo9_cuda PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:${TEMPO9_CUDA_GENCODE}>"
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
  if(TEMPO9_CUDA_LINEINFO)
    target_compile_options(tempo9_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  endif()
  target_include_directories(tempo9_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
  # cuBLAS joins when a kernel uses it (prefill GEMM); until then no binary needs libcublas.
  # dlopen: libcupti, loaded only by a traced run (cuda_trace.cu).
  target_link_libraries(tempo9_cuda PUBLIC tempo9_backend CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_compile_definitions(tempo9_cuda PUBLIC TEMPO9_HAVE_CUDA=1)
  target_link_libraries(tempo9_all INTERFACE tempo9_cuda)
endfunction()
