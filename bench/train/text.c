/* mesh-train's text corpus (text.h): reading, the byte-level tokenizer, the split and the
 * seeded windows. */
#include "text.h"
#include "bpe.h"
#include "data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Appends a file's bytes to *buf (*n bytes, *cap allocated). */
static int append_file(const char *path, uint8_t **buf, size_t *n, size_t *cap, char *err,
                       size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--data: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (*cap - *n < 65536) {
            size_t want = *cap ? 2 * *cap : 1 << 20;
            uint8_t *p = realloc(*buf, want);
            if (!p) {
                fclose(f);
                snprintf(err, errlen, "--data: out of memory reading %s", path);
                return -1;
            }
            *buf = p, *cap = want;
        }
        size_t got = fread(*buf + *n, 1, *cap - *n, f);
        *n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "--data: cannot read %s", path);
        return -1;
    }
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int text_read(const char *path, uint8_t **bytes, size_t *n, int *files, char *err, size_t errlen)
{
    struct stat sb;
    size_t cap = 0;
    *bytes = NULL, *n = 0, *files = 0;
    if (stat(path, &sb)) {
        snprintf(err, errlen, "--data %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        *files = 1;
        return append_file(path, bytes, n, &cap, err, errlen);
    }
    struct dirent **names;
    int count = scandir(path, &names, NULL, by_name), rc = 0;
    if (count < 0) {
        snprintf(err, errlen, "--data %s: %s", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < count; i++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
        /* links would read a text twice (a folder of licenses links GPL to GPL-3) */
        if (rc == 0 && !lstat(file, &sb) && S_ISREG(sb.st_mode)) {
            rc = append_file(file, bytes, n, &cap, err, errlen);
            ++*files;
        }
        free(names[i]);
    }
    free(names);
    if (rc == 0 && *files == 0) {
        snprintf(err, errlen, "--data %s: no regular file in the folder", path);
        rc = -1;
    }
    return rc;
}

size_t text_encode(const uint8_t *bytes, size_t n, int32_t *tokens)
{
    for (size_t i = 0; i < n; i++)
        tokens[i] = bytes[i];
    return n;
}

size_t text_decode(const int32_t *tokens, size_t n, uint8_t *bytes)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= 0 && tokens[i] < TEXT_VOCAB)
            bytes[k++] = (uint8_t)tokens[i];
    return k;
}

size_t text_val_bytes(size_t n, double val_frac)
{
    return (size_t)((double)n * val_frac);
}

int text_build(text_t *t, const uint8_t *bytes, size_t n, double val_frac, int seq,
               const int32_t (*pairs)[2], int merges, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (!(val_frac >= 0 && val_frac < 1)) {
        snprintf(err, errlen, "--val-frac %g: a fraction in [0, 1) is needed", val_frac);
        return -1;
    }
    size_t n_val = text_val_bytes(n, val_frac);
    t->tokens = malloc((n ? n : 1) * sizeof(int32_t));
    t->pairs = malloc((size_t)(merges ? merges : 1) * sizeof(*t->pairs));
    if (!t->tokens || !t->pairs) {
        snprintf(err, errlen, "--data: out of memory for %zu tokens", n);
        return -1;
    }
    if (merges)
        memcpy(t->pairs, pairs, (size_t)merges * sizeof(*t->pairs));
    t->merges = merges, t->bytes = n;
    /* each side encoded apart: no token spans the split */
    size_t n_train = text_tokens(t, bytes, n - n_val, t->tokens);
    size_t n_valt = text_tokens(t, bytes + (n - n_val), n_val, t->tokens + n_train);
    t->n = n_train + n_valt, t->n_train = n_train;
    size_t need = (size_t)seq + 1;
    if (n_train < need || (val_frac > 0 && n_valt < need)) {
        snprintf(err, errlen,
                 "--data: %zu tokens split into %zu for training and %zu for validation "
                 "(--val-frac %g); each needs a window of --seq %d + 1",
                 t->n, n_train, n_valt, val_frac, seq);
        return -1;
    }
    return 0;
}

size_t text_tokens(const text_t *t, const uint8_t *bytes, size_t n, int32_t *out)
{
    return bpe_encode((const int32_t(*)[2])t->pairs, t->merges, out, text_encode(bytes, n, out));
}

size_t text_bytes(const text_t *t, const int32_t *tokens, size_t n, uint8_t *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        if (tokens[i] >= 0 && tokens[i] < TEXT_VOCAB + t->merges)
            k += bpe_bytes((const int32_t(*)[2])t->pairs, tokens[i], out + k, cap - k);
    return k;
}

void text_sample(const text_t *t, int split, uint64_t seed, int64_t index, int64_t sample, int seq,
                 int32_t *tokens, int32_t *targets)
{
    size_t first = split == TEXT_VAL ? t->n_train : 0;
    size_t len = split == TEXT_VAL ? t->n - t->n_train : t->n_train;
    uint64_t salt = split == TEXT_VAL ? 0x7a11da7eull : 0x7e87ull;
    uint64_t h = train_data_mix(train_data_mix(seed ^ salt) + train_data_mix((uint64_t)index) * 31 +
                                (uint64_t)sample);
    const int32_t *w = t->tokens + first + h % (len - (size_t)seq);
    memcpy(tokens, w, (size_t)seq * sizeof(int32_t));
    memcpy(targets, w + 1, (size_t)seq * sizeof(int32_t));
}

double text_unigram_entropy(const int32_t *tokens, size_t n)
{
    int32_t top = 0;
    for (size_t i = 0; i < n; i++)
        top = tokens[i] > top ? tokens[i] : top;
    double *count = calloc((size_t)top + 1, sizeof(double)), h = 0;
    if (!count)
        return NAN;
    for (size_t i = 0; i < n; i++)
        count[tokens[i]]++;
    for (int32_t v = 0; v <= top; v++)
        if (count[v] > 0)
            h -= count[v] / (double)n * log(count[v] / (double)n);
    free(count);
    return h;
}

void text_free(text_t *t)
{
    free(t->tokens), free(t->pairs);
    memset(t, 0, sizeof(*t));
}
