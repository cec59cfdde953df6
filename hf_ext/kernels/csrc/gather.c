/* gather_kv on CPU: copy the selected cache rows of K and V into the compact buffers, one (batch row, KV head)
 * per task over OpenMP threads, one memcpy per row (1.6x torch's per-(row, head) index_select at 8 rows x 4
 * heads x 2.3k of 32k rows of 64 floats). Built by hf_ext/kernels/_native.py.
 *
 * Layout (strides in elements of `size` bytes, unit stride over D): k, v [B, H, N, D] with strides (sb, sh, sn),
 * both alike; idx [B, n] (-1: padding, skipped); kc, vc [B, H, >= n, D] with strides (ob, oh, on), both alike.
 */
#include <stdint.h>
#include <string.h>

void gather_rows(const char *k, const char *v, const int64_t *idx, int64_t b_n, int64_t h_n, int64_t n, int64_t d,
                 int64_t size, int64_t sb, int64_t sh, int64_t sn, int64_t ob, int64_t oh, int64_t on, char *kc,
                 char *vc, int64_t threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < b_n * h_n; ++t) {
        const int64_t b = t / h_n, h = t % h_n, bytes = d * size;
        const int64_t *ix = idx + b * n;
        const char *ks = k + (b * sb + h * sh) * size, *vs = v + (b * sb + h * sh) * size;
        char *kd = kc + (b * ob + h * oh) * size, *vd = vc + (b * ob + h * oh) * size;
        for (int64_t i = 0; i < n; ++i) {
            if (ix[i] < 0) continue;
            memcpy(kd + i * on * size, ks + ix[i] * sn * size, bytes);
            memcpy(vd + i * on * size, vs + ix[i] * sn * size, bytes);
        }
    }
}
