/* chunk_attention: R query rows (a speculative verify) attending causally to a long KV cache, on CPU.
 *
 * One task per (batch row, KV head), split over OpenMP threads. A task holds the G * R query vectors of its KV
 * head transposed (qt[d][m], m padded to MP lanes), so one key costs D broadcast-FMAs over MP lanes and no
 * horizontal sums; it reads every key and value once for all rows, with an online softmax per row, and writes
 * the scaled logits of the requested score rows as it computes them. Built by hf_ext/kernels/_native.py.
 *
 * Layout: q [B, Hq, R, D] contiguous; k, v [B, Hkv, N, D] with unit stride over D; out [B, Hq, R, D] and
 * lse [B, Hq, R] contiguous; score_rows [B, S] (chunk row or -1); scores [B, Hq, S, score_len].
 * Query row r of batch row b sits at slot lengths[b] - R + r and sees slots [0, lengths[b] - R + r].
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK 32

/* e^x for x <= 0 (clamped at -87): 2^i * e^(f ln 2) with |f| <= 1/2 and a degree-7 Taylor polynomial
 * (relative error < 2e-7); plain arithmetic so that the lane loops vectorise. */
static inline float exp_nonpositive(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float t = x * 1.4426950408889634f;
    const float i = rintf(t);
    const float f = (t - i) * 0.6931471805599453f;
    const float p = 1.0f + f * (1.0f + f * (0.5f + f * (0.16666667f + f * (0.041666668f + f * (0.008333334f
                    + f * (0.0013888889f + f * 0.0001984127f))))));
    const int32_t bits = ((int32_t)i + 127) << 23;
    float two_i;
    memcpy(&two_i, &bits, sizeof two_i);
    return p * two_i;
}

#define DEFINE_TASK(MP)                                                                                        \
    static void task_##MP(const float *q, const float *kb, const float *vb, int64_t hq, int64_t g, int64_t r_n,  \
                          int64_t d_n, int64_t skn, int64_t svn, int64_t b, int64_t h, int64_t len, float scale, \
                          float *out, float *lse, const int64_t *srow, int64_t n_score, float *scores,           \
                          int64_t score_len) {                                                                 \
        const int64_t m_n = g * r_n, first = len - r_n;                                                        \
        float qt[d_n][MP], acc[MP][d_n], st[BLOCK][MP], mx[MP], sum[MP], last[MP], corr[MP], bm[MP];           \
        for (int64_t m = 0; m < MP; ++m) {                                                                     \
            const float *qr = q + ((b * hq + h * g + m / r_n) * r_n + m % r_n) * d_n;                          \
            for (int64_t d = 0; d < d_n; ++d) {                                                                \
                qt[d][m] = m < m_n ? qr[d] * scale : 0.0f;                                                     \
                acc[m][d] = 0.0f;                                                                              \
            }                                                                                                  \
            mx[m] = -INFINITY;                                                                                 \
            sum[m] = 0.0f;                                                                                     \
            last[m] = m < m_n ? (float)(first + m % r_n) : -1.0f;                                              \
        }                                                                                                      \
        for (int64_t n0 = 0; n0 < len; n0 += BLOCK) {                                                          \
            const int64_t nb = len - n0 < BLOCK ? len - n0 : BLOCK;                                            \
            memcpy(bm, mx, sizeof bm);                                                                         \
            for (int64_t j = 0; j < nb; ++j) {                                                                 \
                const float *kr = kb + (n0 + j) * skn;                                                         \
                float u[MP] = {0};                                                                             \
                for (int64_t d = 0; d < d_n; ++d) {                                                            \
                    const float kd = kr[d];                                                                    \
                    _Pragma("omp simd") for (int64_t m = 0; m < MP; ++m) u[m] += qt[d][m] * kd;                \
                }                                                                                              \
                const float pos = (float)(n0 + j);                                                             \
                _Pragma("omp simd") for (int64_t m = 0; m < MP; ++m) {                                         \
                    const float x = pos <= last[m] ? u[m] : -INFINITY;                                         \
                    st[j][m] = x;                                                                              \
                    bm[m] = x > bm[m] ? x : bm[m];                                                             \
                }                                                                                              \
            }                                                                                                  \
            for (int64_t c = 0; c < n_score; ++c) {                                                            \
                if (srow[c] < 0) continue;                                                                     \
                for (int64_t gi = 0; gi < g; ++gi) {                                                           \
                    float *dst = scores + ((b * hq + h * g + gi) * n_score + c) * score_len + n0;              \
                    for (int64_t j = 0; j < nb; ++j) dst[j] = st[j][gi * r_n + srow[c]];                       \
                }                                                                                              \
            }                                                                                                  \
            _Pragma("omp simd") for (int64_t m = 0; m < MP; ++m) {                                             \
                corr[m] = bm[m] == -INFINITY ? 1.0f : exp_nonpositive(mx[m] - bm[m]);                          \
                sum[m] *= corr[m];                                                                             \
                mx[m] = bm[m];                                                                                 \
            }                                                                                                  \
            for (int64_t m = 0; m < m_n; ++m) {                                                                \
                if (corr[m] == 1.0f) continue;                                                                 \
                _Pragma("omp simd") for (int64_t d = 0; d < d_n; ++d) acc[m][d] *= corr[m];                    \
            }                                                                                                  \
            for (int64_t j = 0; j < nb; ++j) {                                                                 \
                _Pragma("omp simd") for (int64_t m = 0; m < MP; ++m) {                                         \
                    const float p = st[j][m] == -INFINITY ? 0.0f : exp_nonpositive(st[j][m] - mx[m]);          \
                    st[j][m] = p;                                                                              \
                    sum[m] += p;                                                                               \
                }                                                                                              \
                const float *vr = vb + (n0 + j) * svn;                                                         \
                for (int64_t m = 0; m < m_n; ++m) {                                                            \
                    const float p = st[j][m];                                                                  \
                    _Pragma("omp simd") for (int64_t d = 0; d < d_n; ++d) acc[m][d] += p * vr[d];              \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        for (int64_t m = 0; m < m_n; ++m) {                                                                    \
            const int64_t row = (b * hq + h * g + m / r_n) * r_n + m % r_n;                                    \
            const float inv = 1.0f / sum[m];                                                                   \
            for (int64_t d = 0; d < d_n; ++d) out[row * d_n + d] = acc[m][d] * inv;                            \
            lse[row] = mx[m] + logf(sum[m]);                                                                   \
        }                                                                                                      \
    }

DEFINE_TASK(8)
DEFINE_TASK(16)
DEFINE_TASK(32)
DEFINE_TASK(64)

/* Returns 0, or 1 when G * R exceeds 64 query vectors per KV head (the caller then uses its reference). */
int chunk_attention(const float *q, const float *k, const float *v, int64_t b_n, int64_t hq, int64_t hkv,
                    int64_t r_n, int64_t d_n, int64_t skb, int64_t skh, int64_t skn, int64_t svb, int64_t svh,
                    int64_t svn, const int64_t *lengths, float scale, float *out, float *lse,
                    const int64_t *score_rows, int64_t n_score, float *scores, int64_t score_len, int threads) {
    const int64_t g = hq / hkv, m_n = g * r_n;
    if (m_n > 64) return 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < b_n * hkv; ++t) {
        const int64_t b = t / hkv, h = t % hkv;
        const float *kb = k + b * skb + h * skh, *vb = v + b * svb + h * svh;
        const int64_t *srow = score_rows + b * n_score;
        if (m_n <= 8)
            task_8(q, kb, vb, hq, g, r_n, d_n, skn, svn, b, h, lengths[b], scale, out, lse, srow, n_score, scores,
                   score_len);
        else if (m_n <= 16)
            task_16(q, kb, vb, hq, g, r_n, d_n, skn, svn, b, h, lengths[b], scale, out, lse, srow, n_score, scores,
                    score_len);
        else if (m_n <= 32)
            task_32(q, kb, vb, hq, g, r_n, d_n, skn, svn, b, h, lengths[b], scale, out, lse, srow, n_score, scores,
                    score_len);
        else
            task_64(q, kb, vb, hq, g, r_n, d_n, skn, svn, b, h, lengths[b], scale, out, lse, srow, n_score, scores,
                    score_len);
    }
    return 0;
}
