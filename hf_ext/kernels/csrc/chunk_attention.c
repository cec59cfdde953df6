/* chunk_attention: R query rows (a speculative verify) attending causally to a long KV cache, on CPU.
 *
 * One task per (batch row, KV head), split over OpenMP threads. A task holds its G * R query vectors
 * transposed in lanes of 8 (qv[d][g] holds lanes 8g..8g+7 of dimension d), so a key costs D broadcast-FMAs
 * per 8 lanes and no horizontal sums; keys go in pairs with four partial sums each, so that eight independent
 * FMA chains hide the FMA latency. It reads every key and value once for all rows, keeps an online softmax per
 * row, and writes the scaled logits of the requested score rows as it computes them.
 * Built by hf_ext/kernels/_native.py.
 *
 * Layout: q [B, Hq, R, D] contiguous; k, v [B, Hkv, N, D] with unit stride over D; out [B, Hq, R, D] and
 * lse [B, Hq, R] contiguous; score_rows [B, S] (chunk row or -1); scores [B, Hq, S, score_len].
 * Query row r of batch row b sits at slot lengths[b] - R + r and sees slots [0, lengths[b] - R + r].
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK 32

typedef float v8 __attribute__((vector_size(32)));

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

/* Scaled logits of two keys ka, kc against all lanes: ua, uc [nv] (kc may equal ka). */
static inline void dot_pair(const v8 *qv, int64_t nv, int64_t d_n, const float *ka, const float *kc, v8 *ua,
                            v8 *uc) {
    for (int64_t g = 0; g < nv; ++g) {
        v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
        int64_t d = 0;
        for (; d + 4 <= d_n; d += 4) {
            const v8 q0 = qv[d * nv + g], q1 = qv[(d + 1) * nv + g], q2 = qv[(d + 2) * nv + g],
                     q3 = qv[(d + 3) * nv + g];
            a0 += q0 * ka[d];
            a1 += q1 * ka[d + 1];
            a2 += q2 * ka[d + 2];
            a3 += q3 * ka[d + 3];
            c0 += q0 * kc[d];
            c1 += q1 * kc[d + 1];
            c2 += q2 * kc[d + 2];
            c3 += q3 * kc[d + 3];
        }
        for (; d < d_n; ++d) {
            a0 += qv[d * nv + g] * ka[d];
            c0 += qv[d * nv + g] * kc[d];
        }
        ua[g] = (a0 + a1) + (a2 + a3);
        uc[g] = (c0 + c1) + (c2 + c3);
    }
}

/* nv: lane groups of 8 (a constant after inlining into task_8 / task_n, so the small copies and loops unroll). */
static inline __attribute__((always_inline)) void task(const float *q, const float *kb, const float *vb,
                                                       int64_t hq, int64_t g_n, int64_t r_n, int64_t d_n,
                                                       int64_t skn, int64_t svn, int64_t b, int64_t h, int64_t len,
                                                       float scale, float *out, float *lse, const int64_t *srow,
                                                       int64_t n_score, float *scores, int64_t score_len,
                                                       int64_t nv) {
    const int64_t m_n = g_n * r_n, mp = 8 * nv, first = len - r_n;
    v8 qv[d_n * nv];
    float acc[mp][d_n], st[BLOCK][mp], mx[mp], sum[mp], last[mp], corr[mp], bm[mp];
    float *qs = (float *)qv; /* qs[d * mp + m] */
    for (int64_t m = 0; m < mp; ++m) {
        const float *qr = q + ((b * hq + h * g_n + m / r_n) * r_n + m % r_n) * d_n;
        for (int64_t d = 0; d < d_n; ++d) {
            qs[d * mp + m] = m < m_n ? qr[d] * scale : 0.0f;
            acc[m][d] = 0.0f;
        }
        mx[m] = -INFINITY;
        sum[m] = 0.0f;
        last[m] = m < m_n ? (float)(first + m % r_n) : -1.0f;
    }
    for (int64_t n0 = 0; n0 < len; n0 += BLOCK) {
        const int64_t nb = len - n0 < BLOCK ? len - n0 : BLOCK;
        memcpy(bm, mx, sizeof bm);
        for (int64_t j = 0; j < nb; j += 2) {
            const float *ka = kb + (n0 + j) * skn, *kc = j + 1 < nb ? ka + skn : ka;
            v8 ua[nv], uc[nv];
            dot_pair(qv, nv, d_n, ka, kc, ua, uc);
            memcpy(st[j], ua, sizeof ua);
            if (j + 1 < nb) memcpy(st[j + 1], uc, sizeof uc);
        }
        for (int64_t j = 0; j < nb; ++j) {
            const float pos = (float)(n0 + j);
#pragma omp simd
            for (int64_t m = 0; m < mp; ++m) {
                const float x = pos <= last[m] ? st[j][m] : -INFINITY;
                st[j][m] = x;
                bm[m] = x > bm[m] ? x : bm[m];
            }
        }
        for (int64_t c = 0; c < n_score; ++c) {
            if (srow[c] < 0) continue;
            for (int64_t gi = 0; gi < g_n; ++gi) {
                float *dst = scores + ((b * hq + h * g_n + gi) * n_score + c) * score_len + n0;
                for (int64_t j = 0; j < nb; ++j) dst[j] = st[j][gi * r_n + srow[c]];
            }
        }
#pragma omp simd
        for (int64_t m = 0; m < mp; ++m) {
            corr[m] = bm[m] == -INFINITY ? 1.0f : exp_nonpositive(mx[m] - bm[m]);
            sum[m] *= corr[m];
            mx[m] = bm[m];
        }
        for (int64_t m = 0; m < m_n; ++m) {
            if (corr[m] == 1.0f) continue;
#pragma omp simd
            for (int64_t d = 0; d < d_n; ++d) acc[m][d] *= corr[m];
        }
        for (int64_t j = 0; j < nb; ++j) {
#pragma omp simd
            for (int64_t m = 0; m < mp; ++m) {
                const float p = st[j][m] == -INFINITY ? 0.0f : exp_nonpositive(st[j][m] - mx[m]);
                st[j][m] = p;
                sum[m] += p;
            }
            const float *vr = vb + (n0 + j) * svn;
            for (int64_t m = 0; m < m_n; ++m) {
                const float p = st[j][m];
#pragma omp simd
                for (int64_t d = 0; d < d_n; ++d) acc[m][d] += p * vr[d];
            }
        }
    }
    for (int64_t m = 0; m < m_n; ++m) {
        const int64_t row = (b * hq + h * g_n + m / r_n) * r_n + m % r_n;
        const float inv = 1.0f / sum[m];
        for (int64_t d = 0; d < d_n; ++d) out[row * d_n + d] = acc[m][d] * inv;
        lse[row] = mx[m] + logf(sum[m]);
    }
}

static void task_8(const float *q, const float *kb, const float *vb, int64_t hq, int64_t g_n, int64_t r_n,
                   int64_t d_n, int64_t skn, int64_t svn, int64_t b, int64_t h, int64_t len, float scale,
                   float *out, float *lse, const int64_t *srow, int64_t n_score, float *scores, int64_t score_len) {
    task(q, kb, vb, hq, g_n, r_n, d_n, skn, svn, b, h, len, scale, out, lse, srow, n_score, scores, score_len, 1);
}

static void task_n(const float *q, const float *kb, const float *vb, int64_t hq, int64_t g_n, int64_t r_n,
                   int64_t d_n, int64_t skn, int64_t svn, int64_t b, int64_t h, int64_t len, float scale,
                   float *out, float *lse, const int64_t *srow, int64_t n_score, float *scores, int64_t score_len) {
    task(q, kb, vb, hq, g_n, r_n, d_n, skn, svn, b, h, len, scale, out, lse, srow, n_score, scores, score_len,
         (g_n * r_n + 7) / 8);
}

/* Returns 0, or 1 when G * R exceeds 64 query vectors per KV head (the caller then uses its reference). */
int chunk_attention(const float *q, const float *k, const float *v, int64_t b_n, int64_t hq, int64_t hkv,
                    int64_t r_n, int64_t d_n, int64_t skb, int64_t skh, int64_t skn, int64_t svb, int64_t svh,
                    int64_t svn, const int64_t *lengths, float scale, float *out, float *lse,
                    const int64_t *score_rows, int64_t n_score, float *scores, int64_t score_len, int threads) {
    const int64_t g_n = hq / hkv;
    if (g_n * r_n > 64) return 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) /* rows differ in length; a finished row has almost none */
    for (int64_t t = 0; t < b_n * hkv; ++t) {
        const int64_t b = t / hkv, h = t % hkv;
        (g_n * r_n <= 8 ? task_8 : task_n)(q, k + b * skb + h * skh, v + b * svb + h * svh, hq, g_n, r_n, d_n, skn,
                                           svn, b, h, lengths[b], scale, out, lse, score_rows + b * n_score,
                                           n_score, scores, score_len);
    }
    return 0;
}
