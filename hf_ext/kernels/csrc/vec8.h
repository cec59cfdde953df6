/* Eight-lane float vectors for the C kernels (generic GCC/Clang vector extensions, so the files build on any
 * target; -march=native picks the instructions): unaligned loads and stores, and a vectorised exp. */
#ifndef HF_EXT_VEC8_H
#define HF_EXT_VEC8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8 load8(const float *p) {
    v8 x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline void store8(float *p, v8 x) { memcpy(p, &x, sizeof x); }

/* e^x lane-wise for x <= 0 (clamped at -87; -inf gives exactly 0): 2^i * e^(f ln 2) with i = rint(x log2 e),
 * |f| <= 1/2 and a degree-7 Taylor polynomial (relative error < 2e-7). */
static inline v8 exp8(v8 x) {
    const v8i finite = x > -INFINITY, low = x < -87.0f;
    x = (v8)(((v8i)x & ~low) | ((v8i)((v8){0} - 87.0f) & low));
    const v8 t = x * 1.4426950408889634f;
    const v8 i = (t + 12582912.0f) - 12582912.0f; /* round to nearest (even), as rintf; |t| < 2^22 */
    const v8 f = (t - i) * 0.6931471805599453f;
    const v8 p = 1.0f + f * (1.0f + f * (0.5f + f * (0.16666667f + f * (0.041666668f + f * (0.008333334f
                 + f * (0.0013888889f + f * 0.0001984127f))))));
    const v8i bits = (__builtin_convertvector(i, v8i) + 127) << 23;
    return (v8)((v8i)(p * (v8)bits) & finite);
}

#endif
