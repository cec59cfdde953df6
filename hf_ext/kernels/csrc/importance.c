/* Vegas's selection on CPU. importance: the mean over heads and score rows of each cache position's softmax
 * weight (or scaled logit), from the logits the verify's attention wrote, in one pass and without temporaries.
 * masked_topk: the budget's largest scores per row by a radix select (the row read three times), written in ascending
 * order without a sort. It returns 1 if a row's candidate buffer could not be allocated (the caller then takes
 * another path), 0 otherwise.
 * Built by hf_ext/kernels/_native.py.
 *
 * Layout: logits [B, H, S, n] with unit stride over n (strides sb, sh, ss in floats); lse [B, H, S] contiguous;
 * valid [B]; imp [B, width] contiguous. imp[b][j] = mean over (h, s) for j < valid[b], -inf for j >= valid[b].
 */
#include <stdlib.h>

#include "vec8.h"

#define CHUNK 1024

void importance(const float *logits, const float *lse, int64_t b_n, int64_t h_n, int64_t s_n, int64_t sb,
                int64_t sh, int64_t ss, const int64_t *valid, int64_t width, int64_t weight, float *imp,
                int64_t threads) {
    const int64_t chunks = (width + CHUNK - 1) / CHUNK;
    const float inv = 1.0f / (float)(h_n * s_n);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < b_n * chunks; ++t) {
        const int64_t b = t / chunks, j0 = (t % chunks) * CHUNK;
        const int64_t end = valid[b] < j0 + CHUNK ? valid[b] : j0 + CHUNK;
        float *dst = imp + b * width;
        float acc[CHUNK] __attribute__((aligned(32)));
        memset(acc, 0, sizeof acc);
        for (int64_t h = 0; h < h_n; ++h) {
            for (int64_t s = 0; s < s_n; ++s) {
                const float *row = logits + b * sb + h * sh + s * ss;
                const float m = lse[(b * h_n + h) * s_n + s];
                int64_t j = j0;
                for (; j + 8 <= end; j += 8) {
                    const v8 x = load8(row + j);
                    const v8 a = load8(acc + j - j0);
                    store8(acc + j - j0, a + (weight ? exp8(x - m) : x));
                }
                for (; j < end; ++j) {
                    v8 x = {0};
                    x[0] = row[j];
                    acc[j - j0] += weight ? exp8(x - m)[0] : x[0];
                }
            }
        }
        for (int64_t j = j0; j < end; ++j) dst[j] = acc[j - j0] * inv;
        for (int64_t j = end > j0 ? end : j0; j < j0 + CHUNK && j < width; ++j) dst[j] = -INFINITY;
    }
}

/* An order-preserving unsigned image of a float (larger float, larger key; NaN-free input). */
static inline uint32_t order_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* The key of the k-th largest of x[0..n) (1 <= k <= n) in *kth and, in *above, how many keys exceed it: a radix
 * select whose first digit is the keys' top 11 bits (hist: their counts over the row, then scratch), then the next
 * 11 and the last 10 bits over the few elements that share the digits found so far (copied once). Returns 1 if
 * that copy could not be allocated, 0 otherwise. */
static int kth_largest_key(const float *x, int64_t n, int64_t k, int64_t *hist, int64_t *above, uint32_t *kth) {
    int64_t bin = 2047, m = 0;
    *above = 0;
    for (; hist[bin] < k; --bin) k -= hist[bin], *above += hist[bin];
    uint32_t *cand = malloc((size_t)hist[bin] * sizeof *cand);
    if (!cand) return 1;
    for (int64_t j = 0; j < n; ++j) {
        const uint32_t key = order_key(x[j]);
        if (key >> 21 == (uint32_t)bin) cand[m++] = key;
    }
    uint32_t prefix = (uint32_t)bin << 21;
    for (int shift = 10; shift >= 0; shift -= 10) {
        const int bits = shift ? 11 : 10; /* this digit's width: bits [shift, shift + bits) */
        const uint32_t digits = (1u << bits) - 1, high = ~0u << (shift + bits);
        memset(hist, 0, 2048 * sizeof *hist);
        for (int64_t j = 0; j < m; ++j)
            if ((cand[j] & high) == prefix) ++hist[(cand[j] >> shift) & digits];
        bin = digits;
        for (; hist[bin] < k; --bin) k -= hist[bin], *above += hist[bin];
        prefix |= (uint32_t)bin << shift;
    }
    free(cand);
    *kth = prefix;
    return 0;
}

/* masked_topk per row: the budget[b] largest finite scores of imp[b][0..n), as ascending indices, ties at the
 * threshold by lowest index (as the Triton kernel); out[b][width] padded with -1. */
int masked_topk(const float *imp, int64_t b_n, int64_t n, const int64_t *budget, int64_t width, int64_t *out,
                int64_t threads) {
    int failed = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(| : failed)
    for (int64_t b = 0; b < b_n; ++b) {
        const float *row = imp + b * n;
        int64_t *dst = out + b * width, finite = n, filled = 0, above = 0, hist[2048] = {0};
        for (int64_t j = 0; j < n; ++j) {
            ++hist[order_key(row[j]) >> 21];
            finite -= row[j] == -INFINITY;
        }
        const int64_t k = budget[b] < finite ? budget[b] : finite;
        uint32_t thr = 0;
        if (k > 0 && kth_largest_key(row, n, k, hist, &above, &thr)) {
            failed = 1;
            continue;
        }
        for (int64_t j = 0, ties = k - above; j < n && filled < k; ++j) {
            const uint32_t key = order_key(row[j]);
            if (key > thr || (key == thr && ties-- > 0)) dst[filled++] = j;
        }
        for (; filled < width; ++filled) dst[filled] = -1;
    }
    return failed;
}
