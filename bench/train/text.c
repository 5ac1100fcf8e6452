/* mesh-train's text corpus (text.h): reading, the byte-level tokenizer, the split and the
 * seeded windows. */
#include "text.h"
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

int text_build(text_t *t, const uint8_t *bytes, size_t n, double val_frac, int seq, char *err,
               size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (!(val_frac >= 0 && val_frac < 1)) {
        snprintf(err, errlen, "--val-frac %g: a fraction in [0, 1) is needed", val_frac);
        return -1;
    }
    size_t n_val = (size_t)((double)n * val_frac);
    size_t need = (size_t)seq + 1;
    if (n - n_val < need || (val_frac > 0 && n_val < need)) {
        snprintf(
            err, errlen,
            "--data: %zu tokens split into %zu for training and %zu for validation (--val-frac "
            "%g); each needs a window of --seq %d + 1",
            n, n - n_val, n_val, val_frac, seq);
        return -1;
    }
    if (!(t->tokens = malloc((n ? n : 1) * sizeof(int32_t)))) {
        snprintf(err, errlen, "--data: out of memory for %zu tokens", n);
        return -1;
    }
    t->n = text_encode(bytes, n, t->tokens);
    t->n_train = n - n_val;
    return 0;
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
    double count[TEXT_VOCAB] = {0}, h = 0;
    for (size_t i = 0; i < n; i++)
        count[tokens[i]]++;
    for (int v = 0; v < TEXT_VOCAB; v++)
        if (count[v] > 0)
            h -= count[v] / (double)n * log(count[v] / (double)n);
    return h;
}

void text_free(text_t *t)
{
    free(t->tokens);
    memset(t, 0, sizeof(*t));
}
