/*
 * mesh-train's text corpus: the bytes of a file, or of a folder's regular files in name order,
 * tokenized one token per byte (vocabulary 256) or by a byte-pair encoding learnt on the training
 * bytes (bpe.h, vocabulary 256 + merges), the last fraction of the bytes kept for validation. A
 * sample is a window of seq + 1 tokens whose place depends on (seed, step or validation batch,
 * sample) only, so that every layout and rank count sees the same global batch.
 */
#ifndef MESH_TRAIN_TEXT_H
#define MESH_TRAIN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#define TEXT_VOCAB 256

enum { TEXT_TRAIN = 0, TEXT_VAL = 1 };

typedef struct {
    int32_t *tokens;
    size_t n;       /* tokens in all */
    size_t n_train; /* tokens [0, n_train) train, [n_train, n) validate */
    size_t bytes;   /* the corpus's bytes */
    int files;      /* files read */
    int merges;     /* byte-pair merges (0: one token per byte) */
    int32_t (*pairs)[2];
} text_t;

/* The corpus's bytes (*bytes malloc'ed, *n its length) and the number of files read; 0, or -1
 * with a message in err naming the path. A folder's symbolic links and subfolders are skipped. */
int text_read(const char *path, uint8_t **bytes, size_t *n, int *files, char *err, size_t errlen);
/* Byte-level tokenizer: one token per byte, and back; both return the count written. */
size_t text_encode(const uint8_t *bytes, size_t n, int32_t *tokens);
size_t text_decode(const int32_t *tokens, size_t n, uint8_t *bytes);
/* The bytes that validate: the last val_frac (0 <= val_frac < 1) of n. */
size_t text_val_bytes(size_t n, double val_frac);
/* The tokens of bytes split: the last val_frac of the bytes validate, each side encoded with the
 * merges given (pairs copied; NULL, 0: bytes). Each side needs a window of seq + 1 tokens; -1
 * and a message in err otherwise. */
int text_build(text_t *t, const uint8_t *bytes, size_t n, double val_frac, int seq,
               const int32_t (*pairs)[2], int merges, char *err, size_t errlen);
/* Text to tokens with the corpus's tokenizer (out: room for n), and back (at most cap bytes). */
size_t text_tokens(const text_t *t, const uint8_t *bytes, size_t n, int32_t *out);
size_t text_bytes(const text_t *t, const int32_t *tokens, size_t n, uint8_t *out, size_t cap);
/* Sample `sample` of training step `index` or of validation batch `index`: seq input tokens and
 * the seq targets that follow them. */
void text_sample(const text_t *t, int split, uint64_t seed, int64_t index, int64_t sample, int seq,
                 int32_t *tokens, int32_t *targets);
/* The unigram entropy of tokens [0, n) in nats per token: the loss of the best model that
 * ignores the context. */
double text_unigram_entropy(const int32_t *tokens, size_t n);
void text_free(text_t *t);

#endif
