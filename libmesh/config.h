/* Declared configuration. Each module declares one table of knobs, with the knobs it reads; a
 * knob NAME is read from the environment variable MESH_NAME, then from the file named by
 * MESH_CONFIG_FILE (NAME=value lines), then its default. A value that does not parse as the
 * knob's type, lies outside its range or fails its check is refused when the table registers,
 * naming the variable, the value and what is allowed. `mesh-info -c` prints every table with
 * effective values, ranges and docs.
 *
 * The configuration is the bottom of the core: it reports errors through log.c's emission but
 * initialises nothing else. */
#ifndef MESH_CONFIG_H
#define MESH_CONFIG_H

#include "mesh.h"
#include <stddef.h>

typedef enum {
    MESH_CFG_INT,    /* decimal integer */
    MESH_CFG_SIZE,   /* bytes, with optional k/m/g suffix (powers of 1024) */
    MESH_CFG_DOUBLE, /* floating point */
    MESH_CFG_BOOL,   /* 1/0, y/n, yes/no, on/off, true/false */
    MESH_CFG_STRING, /* free text */
    MESH_CFG_ENUM    /* one of the '|'-separated words in .choices */
} mesh_config_type_t;

/* A value's own check beyond its type and range: 0 when valid; otherwise -1 and why (what is
 * allowed) in why[len]. */
typedef int (*mesh_config_check_fn)(const char *value, char *why, size_t len);

typedef struct {
    const char *name; /* without the MESH_ prefix, e.g. "TIMEOUT" */
    const char *dflt; /* default as text ("" allowed) */
    mesh_config_type_t type;
    const char *doc;     /* one or two sentences */
    const char *choices; /* MESH_CFG_ENUM only */
    /* INT, SIZE, DOUBLE: "min..max" with either side empty for no bound, e.g. "0.001..", "1..64";
     * NULL only for values with no bound at all */
    const char *range;
    mesh_config_check_fn check; /* optional */
} mesh_config_entry_t;

typedef struct {
    const char *module;                 /* "core", "tcp", "coll", ... */
    const mesh_config_entry_t *entries; /* terminated by an entry with name == NULL */
} mesh_config_table_t;

/* Adds a table (idempotent) and validates its values: an unparsable value fails with
 * MESH_ERR_INVALID_ARG naming the variable. */
mesh_status_t mesh_config_register(const mesh_config_table_t *table);
/* Warns once about MESH_* environment variables no registered table declares. */
void mesh_config_warn_unknown(void);

/* Effective value as text; NULL if no registered table declares name. */
const char *mesh_config_str(const char *name);
long long mesh_config_int(const char *name);
size_t mesh_config_size(const char *name);
double mesh_config_double(const char *name);
int mesh_config_bool(const char *name);

/* Parsers shared with tools and tests; return MESH_ERR_INVALID_ARG on bad text. */
mesh_status_t mesh_config_parse_size(const char *text, size_t *out);
mesh_status_t mesh_config_parse_bool(const char *text, int *out);
mesh_status_t mesh_config_parse_int(const char *text, long long *out);
mesh_status_t mesh_config_parse_double(const char *text, double *out);

/* Parses the text of a MESH_CONFIG_FILE (NAME=value lines, '#' comments) without keeping it;
 * the number of entries, or MESH_ERR_INVALID_ARG naming path and the line. */
mesh_status_t mesh_config_file_parse(const char *path, const char *text, size_t len, int *entries);

/* Value of a knob as text if a registered table declares it, else NULL (no error recorded). */
const char *mesh_config_value(const char *name);

/* The configuration's own table (MESH_CONFIG_FILE), registered with the first table. */
mesh_status_t mesh_config_self_register(void);

/* Visits every registered entry (for mesh-info -c): source is "env", "file" or "default". */
typedef void (*mesh_config_visit_fn)(const char *module, const mesh_config_entry_t *e,
                                     const char *value, const char *source, void *arg);
void mesh_config_foreach(mesh_config_visit_fn fn, void *arg);

#endif
