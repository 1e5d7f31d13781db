// First include of every src/backend/cuda/*.cu, before any fmt header (core/check.h and
// core/result.h use fmt 9). With nvcc, fmt 9 turns its FMT_CONSTEXPR functions into plain ones
// (it tests __NVCC__) while keeping constexpr callers, which g++ 12 rejects in C++20; and nvcc's
// front end (CUDA 13.0) rejects fmt's consteval format-string checks. Keeping fmt's constexpr and
// checking format strings at run time makes fmt compile here; the formatted output is the same.
#pragma once

#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif
#ifndef FMT_CONSTEVAL
#define FMT_CONSTEVAL
#endif
