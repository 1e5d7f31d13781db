// Unicode tables for NFC (generated into nfc_data.cpp by tools/gen_nfc_data.py). All sorted by
// their first field so lookups are binary searches.
#pragma once

#include <cstddef>
#include <cstdint>

namespace t9::tok::nfc_data {

struct CombiningClass {
  uint32_t cp;
  uint8_t ccc;  // canonical combining class, > 0
};
struct Decomposition {
  uint32_t cp;
  uint32_t first;
  uint32_t second;  // 0 for singleton decompositions
};
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const CombiningClass kCombiningClass[];
extern const size_t kNumCombiningClass;
extern const Decomposition kDecomposition[];
extern const size_t kNumDecomposition;
extern const Composition kComposition[];
extern const size_t kNumComposition;

}  // namespace t9::tok::nfc_data
