/* mesh-train's data: a seeded generator of token sequences with a learnable rule (most tokens
 * follow from the one before), sample i of step s depending on (seed, s, i) only, so the global
 * batch is the same whatever the layout. */
#include "data.h"

uint64_t train_data_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void train_data_sample(uint64_t seed, int64_t step, int64_t sample, int seq, int vocab,
                       int32_t *tokens, int32_t *targets)
{
    uint64_t state = train_data_mix(train_data_mix(seed ^ 0x5ca1ab1e0ddba11ull) +
                                    train_data_mix((uint64_t)step) * 31 + (uint64_t)sample);
    uint64_t x = state % (uint64_t)vocab;
    for (int t = 0; t <= seq; t++) {
        if (t < seq)
            tokens[t] = (int32_t)x;
        if (t > 0)
            targets[t - 1] = (int32_t)x;
        state = train_data_mix(state + 0x9e3779b97f4a7c15ull);
        /* four times in five the next token is 5 x + 3 + (t mod 4), else any */
        if (state % 5)
            x = (x * 5 + 3 + (uint64_t)(t % 4)) % (uint64_t)vocab;
        else
            x = (state >> 8) % (uint64_t)vocab;
    }
}
