/* The row gather of block_sparse_attention's PyTorch path on CPU: per output row, whole key tiles and then the
 * pooled-key entries, each copied with one memcpy (ATen's index_select pays a TensorIterator set-up per copied
 * row, which dominates for the pooled echo's 1 KB entries).
 * Built by hf_ext/kernels/_native.py.
 *
 * Layout (all contiguous): tiles [N, tile] floats, ids [rows, k]; entries [M, entry] floats, sel [rows, c];
 * dst [rows, k * tile + c * entry]: row r holds tiles[ids[r][0..k)] then entries[sel[r][0..c)].
 */
#include <stdint.h>
#include <string.h>

void gather_rows(float *dst, const float *tiles, const int64_t *ids, int64_t rows, int64_t k, int64_t tile,
                 const float *entries, const int64_t *sel, int64_t c, int64_t entry, int64_t threads) {
    const int64_t width = k * tile + c * entry;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float *out = dst + r * width;
        for (int64_t j = 0; j < k; ++j, out += tile) memcpy(out, tiles + ids[r * k + j] * tile, tile * sizeof(float));
        for (int64_t j = 0; j < c; ++j, out += entry)
            memcpy(out, entries + sel[r * c + j] * entry, entry * sizeof(float));
    }
}
