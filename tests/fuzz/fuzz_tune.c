/*
 * Fuzz target: MESH_TUNE ("[coll:]algo[@min-max],..."), checked as the knob's check does at
 * initialisation.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "collectives/algo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = mesh_fuzz_string(data, size);
    if (text == NULL)
        return 0;
    char why[256] = "";
    if (mesh_coll_tune_check(text, why, sizeof(why)) != 0 && why[0] == '\0')
        abort(); /* a refusal always says why */
    free(text);
    return 0;
}
