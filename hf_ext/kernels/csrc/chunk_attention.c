/* chunk_attention: R query rows (a speculative verify, or one decode row) attending causally to a long KV cache,
 * on CPU.
 *
 * One task per (batch row, KV head), split over OpenMP threads; a task's G * R query vectors share every key and
 * value it reads. Keys go in blocks of 32 (8 kB at D = 64, so a block read from memory once stays in L1 for every
 * query vector). Head dimensions sit in vector lanes of 8:
 * - logits: a query vector is held in registers and dotted with 8 keys at a time, eight independent FMA chains,
 *   whose lane sums are reduced together by a shuffle tree (14 shuffles and 7 adds per 8 keys);
 * - softmax: online, per query vector, over the block's 32 logits at a time (vectorised exp);
 * - values: two query vectors' accumulators stay in registers over the block, so a value vector loaded once
 *   feeds two FMAs.
 * Work per key is then proportional to the query vectors, with no lanes wasted on a one-row decode step. The
 * scaled logits of the requested score rows are written as they are computed. Built by hf_ext/kernels/_native.py.
 *
 * Layout: q [B, Hq, R, D] contiguous; k, v [B, Hkv, N, D] with unit stride over D (D a multiple of 8); out
 * [B, Hq, R, D] and lse [B, Hq, R] contiguous; score_rows [B, S] (chunk row or -1); scores [B, Hq, S, score_len].
 * Row b reads its positions p < P_b in order: with a selection (has_sel) position p is the slot
 * sel_idx[b, p] (sel_idx[b, h, p] per KV head when sel_heads is Hkv, else sel_heads is 1) for p < sel_counts[b],
 * then sel_tail[b] + p - sel_counts[b], and P_b = sel_counts[b] +
 * lengths[b] - sel_tail[b]; without one, position p is slot p and P_b = lengths[b]. Query row r sits at position
 * P_b - R + r and sees positions [0, P_b - R + r]; score rows are written per position.
 */
#include "vec8.h"

#define BLOCK 32
#define PREFETCH 2 /* blocks ahead, for a selection's scattered rows */
#define MAX_VECTORS 64
#define MAX_DV 32 /* D <= 256 */

/* The slot of a row's position p: its selected slots first, then its dense tail. */
static inline int64_t slot_of(const int64_t *ix, int64_t n_ix, int64_t tail, int64_t p) {
    return p < n_ix ? ix[p] : tail + p - n_ix;
}

static inline v8 max8(v8 a, v8 b) {
    const v8i take_a = a > b;
    return (v8)(((v8i)a & take_a) | ((v8i)b & ~take_a));
}

/* Lane i of the result: the sum of the 8 lanes of a[i]. */
static inline v8 sum_lanes(const v8 *a) {
    v8 b[4], c[2];
    for (int i = 0; i < 4; ++i)
        b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 8, 2, 10, 4, 12, 6, 14)
               + __builtin_shufflevector(a[2 * i], a[2 * i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
    for (int i = 0; i < 2; ++i)
        c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13)
               + __builtin_shufflevector(b[2 * i], b[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
    return __builtin_shufflevector(c[0], c[1], 0, 1, 2, 3, 8, 9, 10, 11)
           + __builtin_shufflevector(c[0], c[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

/* st[j] = q . k_j for the block's keys j < BLOCK: kb + j * skn, or kp[j] when kp is not NULL (keys past nb repeat
 * the last one; the caller masks them). */
static inline __attribute__((always_inline)) void block_logits(const v8 *qv, const float *kb, int64_t skn,
                                                               const float *const *kp, int64_t nb, int64_t dv,
                                                               float *st) {
    v8 qr[MAX_DV];
    for (int64_t c = 0; c < dv; ++c) qr[c] = qv[c];
    for (int64_t j0 = 0; j0 < BLOCK; j0 += 8) {
        v8 a[8];
        for (int i = 0; i < 8; ++i) {
            const int64_t j = j0 + i < nb ? j0 + i : nb - 1;
            const float *kj = kp ? kp[j] : kb + j * skn;
            v8 s = qr[0] * load8(kj);
            for (int64_t c = 1; c < dv; ++c) s += qr[c] * load8(kj + 8 * c);
            a[i] = s;
        }
        store8(st + j0, sum_lanes(a));
    }
}

/* acc[m] = acc[m] * corr[m] + sum_j p[m][j] v_j for query vectors m0 and m1 (m1 may equal m0: then once). */
static inline __attribute__((always_inline)) void block_values(float *acc0, float *acc1, const float *p0,
                                                               const float *p1, float c0, float c1,
                                                               const float *vb, int64_t svn,
                                                               const float *const *vp, int64_t nb, int64_t dv,
                                                               int two) {
    v8 a0[MAX_DV], a1[MAX_DV];
    for (int64_t c = 0; c < dv; ++c) {
        a0[c] = load8(acc0 + 8 * c) * c0;
        a1[c] = two ? load8(acc1 + 8 * c) * c1 : a0[c];
    }
    for (int64_t j = 0; j < nb; ++j) {
        const float *vj = vp ? vp[j] : vb + j * svn;
        const float w0 = p0[j], w1 = p1[j];
        for (int64_t c = 0; c < dv; ++c) {
            const v8 x = load8(vj + 8 * c);
            a0[c] += w0 * x;
            if (two) a1[c] += w1 * x;
        }
    }
    for (int64_t c = 0; c < dv; ++c) {
        store8(acc0 + 8 * c, a0[c]);
        if (two) store8(acc1 + 8 * c, a1[c]);
    }
}

/* dv: D / 8 (a constant after inlining into the task_d* wrappers, so that the vector loops unroll and the
 * accumulators stay in registers). */
static inline __attribute__((always_inline)) void task(const float *q, const float *kb, const float *vb,
                                                       int64_t hq, int64_t g_n, int64_t r_n, int64_t skn,
                                                       int64_t svn, int64_t b, int64_t h, int64_t len, float scale,
                                                       float *out, float *lse, const int64_t *srow, int64_t n_score,
                                                       float *scores, int64_t score_len, const int64_t *ix,
                                                       int64_t n_ix, int64_t tail, int64_t dv, int sel) {
    const int64_t d_n = 8 * dv, m_n = g_n * r_n, n_pos = n_ix + len - tail, first = n_pos - r_n;
    float acc[m_n][d_n], st[m_n][BLOCK], mx[m_n], sum[m_n], corr[m_n];
    const float *kp[BLOCK], *vp[BLOCK];
    v8 qv[m_n][dv];
    for (int64_t m = 0; m < m_n; ++m) {
        const float *qr = q + ((b * hq + h * g_n + m / r_n) * r_n + m % r_n) * d_n;
        for (int64_t c = 0; c < dv; ++c) qv[m][c] = load8(qr + 8 * c) * scale;
        memset(acc[m], 0, sizeof acc[m]);
        mx[m] = -INFINITY;
        sum[m] = 0.0f;
    }
    for (int64_t n0 = 0; n0 < n_pos; n0 += BLOCK) {
        const int64_t nb = n_pos - n0 < BLOCK ? n_pos - n0 : BLOCK;
        if (sel) { /* this block's rows, and a prefetch of the rows PREFETCH blocks on (scattered reads) */
            for (int64_t j = 0; j < nb; ++j) {
                kp[j] = kb + slot_of(ix, n_ix, tail, n0 + j) * skn;
                vp[j] = vb + slot_of(ix, n_ix, tail, n0 + j) * svn;
            }
            for (int64_t p = n0 + PREFETCH * BLOCK; p < n0 + (PREFETCH + 1) * BLOCK && p < n_pos; ++p) {
                const int64_t slot = slot_of(ix, n_ix, tail, p);
                for (int64_t d = 0; d < d_n; d += 16) {
                    __builtin_prefetch(kb + slot * skn + d, 0, 1);
                    __builtin_prefetch(vb + slot * svn + d, 0, 1);
                }
            }
        }
        const float *kblock = kb + n0 * skn, *vblock = vb + n0 * svn;
        for (int64_t m = 0; m < m_n; ++m) {
            float *sm = st[m];
            block_logits(qv[m], kblock, skn, sel ? kp : NULL, nb, dv, sm);
            const int64_t seen = first + m % r_n - n0 + 1; /* keys of this block the vector sees (<= nb) */
            for (int64_t j = seen < 0 ? 0 : seen; j < BLOCK; ++j) sm[j] = -INFINITY;
            v8 top = max8(max8(load8(sm), load8(sm + 8)), max8(load8(sm + 16), load8(sm + 24)));
            float bm = mx[m];
            for (int i = 0; i < 8; ++i) bm = top[i] > bm ? top[i] : bm;
            corr[m] = bm == -INFINITY ? 1.0f : exp8((v8){0} + (mx[m] - bm))[0];
            mx[m] = bm;
        }
        for (int64_t c = 0; c < n_score; ++c) {
            if (srow[c] < 0) continue;
            for (int64_t gi = 0; gi < g_n; ++gi) {
                float *dst = scores + ((b * hq + h * g_n + gi) * n_score + c) * score_len + n0;
                memcpy(dst, st[gi * r_n + srow[c]], nb * sizeof(float));
            }
        }
        for (int64_t m = 0; m < m_n; ++m) {
            v8 total = {0};
            for (int j = 0; j < BLOCK; j += 8) {
                const v8 p = exp8(load8(st[m] + j) - mx[m]);
                store8(st[m] + j, p);
                total += p;
            }
            sum[m] = sum[m] * corr[m] + (((total[0] + total[1]) + (total[2] + total[3])) +
                                         ((total[4] + total[5]) + (total[6] + total[7])));
        }
        for (int64_t m = 0; m < m_n; m += 2) {
            if (m + 1 < m_n)
                block_values(acc[m], acc[m + 1], st[m], st[m + 1], corr[m], corr[m + 1], vblock, svn,
                             sel ? vp : NULL, nb, dv, 1);
            else
                block_values(acc[m], acc[m], st[m], st[m], corr[m], corr[m], vblock, svn, sel ? vp : NULL, nb, dv,
                             0);
        }
    }
    for (int64_t m = 0; m < m_n; ++m) {
        const int64_t row = (b * hq + h * g_n + m / r_n) * r_n + m % r_n;
        const float inv = 1.0f / sum[m];
        for (int64_t d = 0; d < d_n; ++d) out[row * d_n + d] = acc[m][d] * inv;
        lse[row] = mx[m] + logf(sum[m]);
    }
}

#define TASK_ARGS                                                                                                \
    const float *q, const float *kb, const float *vb, int64_t hq, int64_t g_n, int64_t r_n, int64_t skn,         \
        int64_t svn, int64_t b, int64_t h, int64_t len, float scale, float *out, float *lse, const int64_t *srow, \
        int64_t n_score, float *scores, int64_t score_len, const int64_t *ix, int64_t n_ix, int64_t tail, int64_t dv
#define TASK_CALL(dv) task(q, kb, vb, hq, g_n, r_n, skn, svn, b, h, len, scale, out, lse, srow, n_score, scores, \
                           score_len, ix, n_ix, tail, dv, sel)
#define VARIANTS(suffix, dv_value)                                                                              \
    static void task_##suffix(TASK_ARGS) { const int sel = 0; (void)dv; TASK_CALL(dv_value); }                 \
    static void task_##suffix##_sel(TASK_ARGS) { const int sel = 1; (void)dv; TASK_CALL(dv_value); }

VARIANTS(d32, 4)
VARIANTS(d64, 8)
VARIANTS(d128, 16)
VARIANTS(any, dv)

/* Returns 0, or 1 when the shapes are outside the kernel (more than 64 query vectors per KV head, or D not a
 * multiple of 8): the caller then uses its reference. */
int chunk_attention(const float *q, const float *k, const float *v, int64_t b_n, int64_t hq, int64_t hkv,
                    int64_t r_n, int64_t d_n, int64_t skb, int64_t skh, int64_t skn, int64_t svb, int64_t svh,
                    int64_t svn, const int64_t *lengths, int64_t has_sel, const int64_t *sel_idx, int64_t sel_heads,
                    int64_t sel_n, const int64_t *sel_counts, const int64_t *sel_tail, float scale, float *out, float *lse,
                    const int64_t *score_rows, int64_t n_score, float *scores, int64_t score_len, int64_t threads) {
    const int64_t g_n = hq / hkv;
    if (g_n * r_n > MAX_VECTORS || d_n % 8) return 1;
    void (*run)(TASK_ARGS) = d_n == 64 ? (has_sel ? task_d64_sel : task_d64)
                             : d_n == 128 ? (has_sel ? task_d128_sel : task_d128)
                             : d_n == 32 ? (has_sel ? task_d32_sel : task_d32)
                             : (has_sel ? task_any_sel : task_any);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) /* rows differ in length; a finished row has almost none */
    for (int64_t t = 0; t < b_n * hkv; ++t) {
        const int64_t b = t / hkv, h = t % hkv;
        const int64_t n_ix = has_sel ? sel_counts[b] : 0, tail = has_sel ? sel_tail[b] : 0;
        run(q, k + b * skb + h * skh, v + b * svb + h * svh, hq, g_n, r_n, skn, svn, b, h, lengths[b], scale, out,
            lse, score_rows + b * n_score, n_score, scores, score_len,
            sel_idx + (sel_heads > 1 ? t : b) * sel_n, n_ix, tail, d_n / 8);
    }
    return 0;
}
