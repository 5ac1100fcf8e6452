#ifndef MESH_TRAIN_DATA_H
#define MESH_TRAIN_DATA_H

#include <stdint.h>

/* splitmix64's finalizer: the generator's hash of 64 bits. */
uint64_t train_data_mix(uint64_t z);
/* Sample `sample` of the global batch of step `step`: seq input tokens and the seq targets that
 * follow them. */
void train_data_sample(uint64_t seed, int64_t step, int64_t sample, int seq, int vocab,
                       int32_t *tokens, int32_t *targets);

#endif
