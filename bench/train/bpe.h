/*
 * mesh-train's byte-pair encoding: merges learnt on a corpus's bytes, GPT-2's tokenizer without
 * its pre-splitting into words. Token 256 + i stands for the pair merges[i] (two earlier tokens);
 * the bytes are tokens 0..255.
 */
#ifndef MESH_TRAIN_BPE_H
#define MESH_TRAIN_BPE_H

#include <stddef.h>
#include <stdint.h>

/* Learns up to `merges` merges on tokens[0, n) (bytes), each the most frequent adjacent pair
 * (the smaller pair on a tie), until no pair occurs twice; returns how many were learnt, -1 out
 * of memory. pairs: [merges][2]. */
int bpe_train(const int32_t *tokens, size_t n, int merges, int32_t (*pairs)[2]);
/* Applies the merges in their order to tokens[0, n), in place; returns the new count. */
size_t bpe_encode(const int32_t (*pairs)[2], int merges, int32_t *tokens, size_t n);
/* The bytes of token tok into out (room for cap); returns their count (cap at most). */
size_t bpe_bytes(const int32_t (*pairs)[2], int32_t tok, uint8_t *out, size_t cap);

#endif
