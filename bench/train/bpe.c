/* mesh-train's byte-pair encoding (bpe.h): pair counts in a dense table over the vocabulary so
 * far, each merge a pass over the tokens. */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

/* Replaces every non-overlapping (a, b), left to right, by tok; returns the new count. */
static size_t merge(int32_t *tokens, size_t n, int32_t a, int32_t b, int32_t tok)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && tokens[i] == a && tokens[i + 1] == b) {
            tokens[k++] = tok;
            i++;
        } else {
            tokens[k++] = tokens[i];
        }
    }
    return k;
}

int bpe_train(const int32_t *tokens, size_t n, int merges, int32_t (*pairs)[2])
{
    size_t V = 256 + (size_t)merges;
    int32_t *work = malloc((n ? n : 1) * sizeof(int32_t));
    uint32_t *count = malloc(V * V * sizeof(uint32_t));
    if (!work || !count) {
        free(work), free(count);
        return -1;
    }
    memcpy(work, tokens, n * sizeof(int32_t));
    int learnt = 0;
    for (; learnt < merges; learnt++) {
        size_t v = 256 + (size_t)learnt;
        memset(count, 0, v * v * sizeof(uint32_t));
        for (size_t i = 0; i + 1 < n; i++)
            count[(size_t)work[i] * v + (size_t)work[i + 1]]++;
        size_t best = 0;
        for (size_t p = 1; p < v * v; p++)
            best = count[p] > count[best] ? p : best;
        if (count[best] < 2)
            break;
        pairs[learnt][0] = (int32_t)(best / v), pairs[learnt][1] = (int32_t)(best % v);
        n = merge(work, n, pairs[learnt][0], pairs[learnt][1], (int32_t)v);
    }
    free(work), free(count);
    return learnt;
}

size_t bpe_encode(const int32_t (*pairs)[2], int merges, int32_t *tokens, size_t n)
{
    for (int i = 0; i < merges; i++)
        n = merge(tokens, n, pairs[i][0], pairs[i][1], 256 + i);
    return n;
}

size_t bpe_bytes(const int32_t (*pairs)[2], int32_t tok, uint8_t *out, size_t cap)
{
    if (cap == 0)
        return 0;
    if (tok < 256) {
        out[0] = (uint8_t)tok;
        return 1;
    }
    size_t k = bpe_bytes(pairs, pairs[tok - 256][0], out, cap);
    return k + bpe_bytes(pairs, pairs[tok - 256][1], out + k, cap - k);
}
