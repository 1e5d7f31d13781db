// Non-linear codebooks of the i-quants (values from the GGUF format specification).
#pragma once

#include <cstdint>

namespace t9 {

// IQ4_NL / IQ4_XS: a 4-bit index selects one of these 16 levels, scaled by the block's d.
// Denser near zero, where trained weights concentrate.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace t9
