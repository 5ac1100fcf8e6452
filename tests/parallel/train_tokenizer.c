/* mesh-train's text corpus (bench/train/text.c): the byte tokenizer's round trip, a folder read
 * in name order without its links and subfolders, the split's sizes and refusals, the windows
 * (inside their split, targets one token on, the same for the same seed and index) and the
 * unigram entropy. */
#include "bench/train/bpe.h"
#include "bench/train/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void round_trip(void)
{
    uint8_t bytes[512], back[512];
    int32_t tokens[512];
    for (int i = 0; i < 512; i++)
        bytes[i] = (uint8_t)(i * 7 + 3);
    CHECK(text_encode(bytes, 512, tokens) == 512, "encode count");
    int in_range = 1;
    for (int i = 0; i < 512; i++)
        in_range &= tokens[i] == bytes[i];
    CHECK(in_range, "a byte's token is the byte");
    CHECK(text_decode(tokens, 512, back) == 512 && !memcmp(bytes, back, 512), "round trip");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void read_folder(void)
{
    char dir[] = "/tmp/train_text_XXXXXX", p[256], q[256];
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(p, sizeof(p), "%s/b.txt", dir), write_file(p, "world\n");
    snprintf(p, sizeof(p), "%s/a.txt", dir), write_file(p, "hello ");
    snprintf(q, sizeof(q), "%s/c-link", dir);
    CHECK(symlink(p, q) == 0, "symlink");
    snprintf(q, sizeof(q), "%s/sub", dir);
    CHECK(mkdir(q, 0700) == 0, "mkdir");
    uint8_t *bytes;
    size_t n;
    int files;
    char err[256];
    CHECK(text_read(dir, &bytes, &n, &files, err, sizeof(err)) == 0, "read folder: %s", err);
    CHECK(files == 2 && n == 12 && !memcmp(bytes, "hello world\n", 12),
          "the folder's two files in name order: %d files, %zu bytes", files, n);
    free(bytes);
    CHECK(text_read(p, &bytes, &n, &files, err, sizeof(err)) == 0 && files == 1 && n == 6,
          "one file");
    free(bytes);
    snprintf(q, sizeof(q), "%s/none", dir);
    CHECK(text_read(q, &bytes, &n, &files, err, sizeof(err)) == -1 && strstr(err, q),
          "a missing path is named: %s", err);
    snprintf(q, sizeof(q), "rm -rf '%s'", dir);
    CHECK(system(q) == 0, "cleanup");
}

static void split_and_windows(void)
{
    enum { N = 1000, SEQ = 16 };
    uint8_t bytes[N];
    for (int i = 0; i < N; i++)
        bytes[i] = (uint8_t)(i % 251);
    text_t t;
    char err[256];
    CHECK(text_build(&t, bytes, N, 0.1, SEQ, NULL, 0, err, sizeof(err)) == 0, "build: %s", err);
    CHECK(t.n == N && t.n_train == 900, "split 0.1 of 1000: %zu train of %zu", t.n_train, t.n);
    int32_t x[SEQ], y[SEQ], x2[SEQ], y2[SEQ];
    int inside = 1, shifted = 1, same = 1, differ = 0;
    for (int split = TEXT_TRAIN; split <= TEXT_VAL; split++)
        for (int64_t i = 0; i < 200; i++) {
            text_sample(&t, split, 5, i, i % 7, SEQ, x, y);
            text_sample(&t, split, 5, i, i % 7, SEQ, x2, y2);
            same &= !memcmp(x, x2, sizeof(x)) && !memcmp(y, y2, sizeof(y));
            size_t lo = split == TEXT_VAL ? t.n_train : 0, hi = split == TEXT_VAL ? t.n : t.n_train;
            /* a value repeats every 251 tokens: any match inside the split will do */
            int ok = 0;
            for (size_t a = lo; a + SEQ < hi; a++)
                ok |=
                    !memcmp(t.tokens + a, x, sizeof(x)) && !memcmp(t.tokens + a + 1, y, sizeof(y));
            inside &= ok;
            for (int k = 0; k + 1 < SEQ; k++)
                shifted &= y[k] == x[k + 1];
            text_sample(&t, split, 6, i, i % 7, SEQ, x2, y2);
            differ += memcmp(x, x2, sizeof(x)) != 0;
        }
    CHECK(inside, "every window lies in its split with its targets one token on");
    CHECK(shifted, "targets are the inputs shifted by one");
    CHECK(same, "a window depends on (seed, index, sample) only");
    CHECK(differ > 300, "another seed moves the windows (%d of 400 moved)", differ);
    text_free(&t);
    CHECK(text_build(&t, bytes, N, 0, SEQ, NULL, 0, err, sizeof(err)) == 0 && t.n_train == N,
          "val-frac 0: all train");
    text_free(&t);
    CHECK(text_build(&t, bytes, 100, 0.1, SEQ, NULL, 0, err, sizeof(err)) == -1 &&
              strstr(err, "--seq 16"),
          "10 validation tokens are refused for --seq 16: %s", err);
    CHECK(text_build(&t, bytes, N, 1.0, SEQ, NULL, 0, err, sizeof(err)) == -1 &&
              strstr(err, "--val-frac"),
          "val-frac 1 refused");
}

/* Byte-pair merges: the most frequent pair first, the corpus round trip through them, fewer tokens
 * than bytes, no token across the split. */
static void byte_pairs(void)
{
    static const char *const words[] = {"the ", "cat ", "sat ", "on ",  "mat ",
                                        "hat ", "bat ", "a ",   "dog ", "ran "};
    enum { N = 6000 };
    size_t n = 0;
    uint8_t *bytes = malloc(N + 8), *back = malloc(N + 8);
    int32_t *tokens = malloc((N + 8) * sizeof(int32_t)), pairs[64][2];
    for (uint32_t x = 12345; n < N;) {
        x = x * 1103515245u + 12345u;
        const char *w = words[(x >> 16) % 10];
        memcpy(bytes + n, w, strlen(w));
        n += strlen(w);
    }
    int got = bpe_train(tokens, text_encode(bytes, n, tokens), 64, pairs);
    CHECK(got == 64, "64 merges learnt, not %d", got);
    /* the first merge is the most frequent byte pair (the smaller on a tie) */
    static uint32_t count[256][256];
    int ba = 0, bb = 0;
    for (size_t i = 0; i + 1 < n; i++)
        count[bytes[i]][bytes[i + 1]]++;
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
            if (count[a][b] > count[ba][bb])
                ba = a, bb = b;
    CHECK(pairs[0][0] == ba && pairs[0][1] == bb, "first merge (%d, %d), not (%d, %d)", pairs[0][0],
          pairs[0][1], ba, bb);
    text_t t;
    char err[256];
    CHECK(text_build(&t, bytes, n, 0.1, 8, (const int32_t(*)[2])pairs, 64, err, sizeof(err)) == 0,
          "build with merges: %s", err);
    CHECK(t.n < n / 2, "%zu tokens for %zu bytes: the merges compress", t.n, n);
    CHECK(text_bytes(&t, t.tokens, t.n, back, n) == n && !memcmp(bytes, back, n),
          "the bytes come back through the merges");
    size_t n_val = text_val_bytes(n, 0.1);
    CHECK(text_bytes(&t, t.tokens + t.n_train, t.n - t.n_train, back, n) == n_val &&
              !memcmp(back, bytes + n - n_val, n_val),
          "the validation tokens are the last 10%% of the bytes exactly");
    int in_vocab = 1;
    for (size_t i = 0; i < t.n; i++)
        in_vocab &= t.tokens[i] >= 0 && t.tokens[i] < TEXT_VOCAB + 64;
    CHECK(in_vocab, "tokens below 256 + merges");
    int32_t prompt[8];
    CHECK(text_tokens(&t, (const uint8_t *)"the cat", 7, prompt) < 7, "a prompt is merged too");
    text_free(&t);
    free(bytes), free(back), free(tokens);
}

static void entropy(void)
{
    int32_t four[400], one[10] = {0};
    for (int i = 0; i < 400; i++)
        four[i] = "abcd"[i % 4];
    CHECK(fabs(text_unigram_entropy(four, 400) - log(4.0)) < 1e-12, "4 equally likely: ln 4");
    CHECK(text_unigram_entropy(one, 10) == 0, "one symbol: 0");
}

int main(void)
{
    round_trip();
    read_folder();
    split_and_windows();
    byte_pairs();
    entropy();
    if (failures)
        printf("%d failures\n", failures);
    else
        printf("ok: tokenizer, folder, split, windows, byte pairs, entropy\n");
    return failures ? 1 : 0;
}
