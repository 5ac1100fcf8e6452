/*
 * Fuzz target: the configuration a user hands in. The input is the text of a MESH_CONFIG_FILE;
 * every value in it (and the whole input) also goes through the parsers of the knobs' types,
 * as the environment's values do.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "libmesh/config.h"

#include <stdlib.h>
#include <string.h>

static void parse_value(const char *v)
{
    long long i;
    size_t sz;
    double d;
    int b;
    (void)mesh_config_parse_int(v, &i);
    (void)mesh_config_parse_size(v, &sz);
    (void)mesh_config_parse_double(v, &d);
    (void)mesh_config_parse_bool(v, &b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n = -1;
    if (mesh_config_file_parse("fuzz.conf", (const char *)data, size, &n) == MESH_OK && n < 0)
        abort();
    char *text = mesh_fuzz_string(data, size);
    if (text == NULL)
        return 0;
    parse_value(text);
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *eq = strchr(line, '=');
        parse_value(eq != NULL ? eq + 1 : line);
    }
    free(text);
    return 0;
}
