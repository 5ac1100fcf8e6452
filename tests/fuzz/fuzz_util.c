/* Helpers shared by the fuzz targets. */
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>
#include <string.h>

char *mesh_fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return NULL;
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
