/* Declared configuration tables. Values are resolved and validated once, when a table is
 * registered (environment, then the file named by MESH_CONFIG_FILE, then the default); the
 * registry only grows, so readers walk it without a lock. */
#define MESH_LOG_SUBSYSTEM "config"
#include "libmesh/config.h"
#include "libmesh/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MESH_CONFIG_MAX_TABLES 32
#define MESH_CONFIG_PREFIX     "MESH_"

extern char **environ;

typedef struct {
    const char *value;  /* effective text */
    const char *source; /* "env", "file" or "default" */
    long long i;        /* INT; ENUM: index of the choice; BOOL: 0/1 */
    size_t size;
    double d;
} mesh_config_value_t;

typedef struct {
    const mesh_config_table_t *table;
    int count;
    mesh_config_value_t *values;
} mesh_config_slot_t;

/* NAME=value pairs of the config file, names without the MESH_ prefix. */
typedef struct {
    char *path;
    int count;
    char **names;
    char **values;
} mesh_config_file_t;

static const mesh_config_entry_t mesh_config_self_entries[] = {
    {.name = "CONFIG_FILE",
     .dflt = "",
     .type = MESH_CFG_STRING,
     .doc = "File of NAME=value lines read for knobs not set in the environment (only the "
            "environment sets this one)."},
    {.name = NULL},
};
static const mesh_config_table_t mesh_config_self_table = {"config", mesh_config_self_entries};

static mesh_config_slot_t mesh_config_slots[MESH_CONFIG_MAX_TABLES];
static atomic_int mesh_config_nslots;
static pthread_mutex_t mesh_config_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_config_file_t mesh_config_file;
static char **mesh_config_warned; /* unknown variables already warned about */
static int mesh_config_nwarned;

static const char *mesh_config_type_name(mesh_config_type_t t)
{
    static const char *const names[] = {"integer", "size", "number", "boolean", "string", "choice"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "value";
}

static const char *mesh_config_skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static int mesh_config_rest_blank(const char *p)
{
    return *mesh_config_skip_space(p) == '\0';
}

mesh_status_t mesh_config_parse_int(const char *text, long long *out)
{
    if (text == NULL)
        return MESH_ERR_INVALID_ARG;
    const char *p = mesh_config_skip_space(text);
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno != 0 || !mesh_config_rest_blank(end))
        return MESH_ERR_INVALID_ARG;
    *out = v;
    return MESH_OK;
}

mesh_status_t mesh_config_parse_size(const char *text, size_t *out)
{
    if (text == NULL)
        return MESH_ERR_INVALID_ARG;
    const char *p = mesh_config_skip_space(text);
    if (!isdigit((unsigned char)*p))
        return MESH_ERR_INVALID_ARG;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno != 0)
        return MESH_ERR_INVALID_ARG;
    unsigned shift = 0;
    switch (tolower((unsigned char)*end)) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    case 't':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift != 0) {
        end++;
        /* "4k", "4kb" and "4kib" all mean 4096 bytes */
        if (tolower((unsigned char)*end) == 'i' && tolower((unsigned char)end[1]) == 'b')
            end += 2;
        else if (tolower((unsigned char)*end) == 'b')
            end++;
    } else if (tolower((unsigned char)*end) == 'b') {
        end++;
    }
    if (!mesh_config_rest_blank(end))
        return MESH_ERR_INVALID_ARG;
    if (shift != 0 && v > (SIZE_MAX >> shift))
        return MESH_ERR_INVALID_ARG;
    if (v > SIZE_MAX)
        return MESH_ERR_INVALID_ARG;
    *out = (size_t)(v << shift);
    return MESH_OK;
}

mesh_status_t mesh_config_parse_double(const char *text, double *out)
{
    if (text == NULL)
        return MESH_ERR_INVALID_ARG;
    const char *p = mesh_config_skip_space(text);
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno != 0 || !mesh_config_rest_blank(end) || isnan(v))
        return MESH_ERR_INVALID_ARG;
    *out = v;
    return MESH_OK;
}

mesh_status_t mesh_config_parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"1", "y", "yes", "on", "true"};
    static const char *const no[] = {"0", "n", "no", "off", "false"};
    if (text == NULL)
        return MESH_ERR_INVALID_ARG;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return MESH_OK;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return MESH_OK;
        }
    }
    return MESH_ERR_INVALID_ARG;
}

/* Index of text among the '|'-separated choices (case-insensitive), or -1. */
static int mesh_config_enum_index(const char *choices, const char *text)
{
    size_t tlen = strlen(text);
    int idx = 0;
    for (const char *p = choices != NULL ? choices : ""; *p != '\0'; idx++) {
        size_t len = strcspn(p, "|");
        if (len == tlen && strncasecmp(p, text, len) == 0)
            return idx;
        p += len;
        if (*p == '|')
            p++;
    }
    return -1;
}

static void mesh_config_file_clear(mesh_config_file_t *f)
{
    for (int i = 0; i < f->count; i++) {
        free(f->names[i]);
        free(f->values[i]);
    }
    free(f->names);
    free(f->values);
    free(f->path);
    memset(f, 0, sizeof(*f));
}

static char *mesh_config_trim(char *s)
{
    s = (char *)mesh_config_skip_space(s);
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Reads NAME=value lines from fp into f (path names it in messages). */
static mesh_status_t mesh_config_file_read(FILE *fp, const char *path, mesh_config_file_t *f)
{
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof(line), fp) != NULL) {
        lineno++;
        size_t n = strlen(line);
        /* a longer line would be read as several: refuse it rather than guess */
        if (n == sizeof(line) - 1 && line[n - 1] != '\n' && !feof(fp))
            return mesh_error(MESH_ERR_INVALID_ARG, "%s:%d: line longer than %zu characters", path,
                              lineno, sizeof(line) - 2);
        char *s = mesh_config_trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s:%d: expected NAME=value, got '%s'", path,
                              lineno, s);
        *eq = '\0';
        char *name = mesh_config_trim(s);
        char *value = mesh_config_trim(eq + 1);
        if (strncmp(name, MESH_CONFIG_PREFIX, strlen(MESH_CONFIG_PREFIX)) == 0)
            name += strlen(MESH_CONFIG_PREFIX);
        char **names = realloc(f->names, (size_t)(f->count + 1) * sizeof(*names));
        if (names != NULL)
            f->names = names;
        char **values = realloc(f->values, (size_t)(f->count + 1) * sizeof(*values));
        if (values != NULL)
            f->values = values;
        char *nc = names && values ? strdup(name) : NULL, *vc = nc ? strdup(value) : NULL;
        if (vc == NULL) {
            free(nc);
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot store the entries of '%s'", path);
        }
        f->names[f->count] = nc;
        f->values[f->count] = vc;
        f->count++;
    }
    return MESH_OK;
}

mesh_status_t mesh_config_file_parse(const char *path, const char *text, size_t len, int *entries)
{
    mesh_config_file_t f = {0};
    FILE *fp = len > 0 ? fmemopen((void *)text, len, "r") : NULL;
    if (len > 0 && fp == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot read the text of '%s'", path);
    mesh_status_t st = fp != NULL ? mesh_config_file_read(fp, path, &f) : MESH_OK;
    if (fp != NULL)
        fclose(fp);
    if (st == MESH_OK)
        *entries = f.count;
    mesh_config_file_clear(&f);
    return st;
}

/* (Re)reads the file named by MESH_CONFIG_FILE when that name changed. Called locked. */
static mesh_status_t mesh_config_file_load(void)
{
    const char *path = getenv(MESH_CONFIG_PREFIX "CONFIG_FILE");
    if (path == NULL || path[0] == '\0') {
        mesh_config_file_clear(&mesh_config_file);
        return MESH_OK;
    }
    if (mesh_config_file.path != NULL && strcmp(mesh_config_file.path, path) == 0)
        return MESH_OK;
    mesh_config_file_clear(&mesh_config_file);

    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "cannot open MESH_CONFIG_FILE '%s': %m", path);
    mesh_config_file_t f = {.path = strdup(path)};
    mesh_status_t st = mesh_config_file_read(fp, path, &f);
    fclose(fp);
    if (st != MESH_OK) {
        mesh_config_file_clear(&f);
        return st;
    }
    mesh_config_file = f;
    return MESH_OK;
}

static const char *mesh_config_file_value(const char *name)
{
    const char *v = NULL;
    for (int i = 0; i < mesh_config_file.count; i++)
        if (strcmp(mesh_config_file.names[i], name) == 0)
            v = mesh_config_file.values[i]; /* the last line wins */
    return v;
}

/* Parses text as the entry's type into *out; MESH_ERR_INVALID_ARG (unlogged) if it is bad. */
static mesh_status_t mesh_config_parse_entry(const mesh_config_entry_t *e, const char *text,
                                             mesh_config_value_t *out)
{
    int b;
    switch (e->type) {
    case MESH_CFG_INT:
        MESH_CHECK(mesh_config_parse_int(text, &out->i));
        out->d = (double)out->i;
        out->size = out->i > 0 ? (size_t)out->i : 0;
        return MESH_OK;
    case MESH_CFG_SIZE:
        MESH_CHECK(mesh_config_parse_size(text, &out->size));
        out->i = out->size > (size_t)LLONG_MAX ? LLONG_MAX : (long long)out->size;
        out->d = (double)out->size;
        return MESH_OK;
    case MESH_CFG_DOUBLE:
        MESH_CHECK(mesh_config_parse_double(text, &out->d));
        out->i = (long long)out->d;
        return MESH_OK;
    case MESH_CFG_BOOL:
        MESH_CHECK(mesh_config_parse_bool(text, &b));
        out->i = b;
        out->d = b;
        return MESH_OK;
    case MESH_CFG_ENUM:
        out->i = mesh_config_enum_index(e->choices, text);
        return out->i < 0 ? MESH_ERR_INVALID_ARG : MESH_OK;
    case MESH_CFG_STRING:
        return MESH_OK;
    }
    return MESH_ERR_INVALID_ARG;
}

/* Whether a parsed number lies in the entry's "min..max" (either side may be empty). */
static int mesh_config_in_range(const mesh_config_entry_t *e, const mesh_config_value_t *v)
{
    if (e->range == NULL ||
        (e->type != MESH_CFG_INT && e->type != MESH_CFG_SIZE && e->type != MESH_CFG_DOUBLE))
        return 1;
    const char *dots = strstr(e->range, "..");
    if (dots == NULL)
        return 1;
    double x = e->type == MESH_CFG_INT    ? (double)v->i
               : e->type == MESH_CFG_SIZE ? (double)v->size
                                          : v->d;
    char lo[32], *end;
    snprintf(lo, sizeof(lo), "%.*s", (int)(dots - e->range), e->range);
    if (lo[0] != '\0') {
        size_t sz;
        double b = strtod(lo, &end);
        if (*end != '\0' && mesh_config_parse_size(lo, &sz) == MESH_OK)
            b = (double)sz;
        if (x < b)
            return 0;
    }
    if (dots[2] != '\0') {
        size_t sz;
        double b = strtod(dots + 2, &end);
        if (*end != '\0' && mesh_config_parse_size(dots + 2, &sz) == MESH_OK)
            b = (double)sz;
        if (x > b)
            return 0;
    }
    return 1;
}

/* Slot and value of a declared knob; NULL when none declares it. Lock-free. */
static const mesh_config_value_t *mesh_config_find(const char *name,
                                                   const mesh_config_entry_t **entry)
{
    if (name == NULL)
        return NULL;
    if (strncmp(name, MESH_CONFIG_PREFIX, strlen(MESH_CONFIG_PREFIX)) == 0)
        name += strlen(MESH_CONFIG_PREFIX);
    int n = atomic_load_explicit(&mesh_config_nslots, memory_order_acquire);
    for (int s = 0; s < n; s++) {
        const mesh_config_slot_t *slot = &mesh_config_slots[s];
        for (int i = 0; i < slot->count; i++) {
            if (strcmp(slot->table->entries[i].name, name) == 0) {
                if (entry != NULL)
                    *entry = &slot->table->entries[i];
                return &slot->values[i];
            }
        }
    }
    return NULL;
}

static int mesh_config_registered(const mesh_config_table_t *table)
{
    int n = atomic_load_explicit(&mesh_config_nslots, memory_order_relaxed);
    for (int s = 0; s < n; s++)
        if (mesh_config_slots[s].table == table ||
            mesh_config_slots[s].table->entries == table->entries)
            return 1;
    return 0;
}

/* Resolves and validates every entry of table into values. Called locked. */
static mesh_status_t mesh_config_resolve(const mesh_config_table_t *table, int count,
                                         mesh_config_value_t *values)
{
    char envname[128];
    for (int i = 0; i < count; i++) {
        const mesh_config_entry_t *e = &table->entries[i];
        const mesh_config_entry_t *other;
        if (mesh_config_find(e->name, &other) != NULL)
            return mesh_error(MESH_ERR_INTERNAL, "knob MESH_%s of module %s is declared twice",
                              e->name, table->module);
        snprintf(envname, sizeof(envname), MESH_CONFIG_PREFIX "%s", e->name);
        const char *text = getenv(envname);
        const char *source = "env";
        if (text == NULL) {
            text = mesh_config_file_value(e->name);
            source = "file";
        }
        if (text == NULL) {
            text = e->dflt != NULL ? e->dflt : "";
            source = "default";
        }
        mesh_config_value_t *v = &values[i];
        if (mesh_config_parse_entry(e, text, v) != MESH_OK) {
            if (e->type == MESH_CFG_ENUM)
                return mesh_error(MESH_ERR_INVALID_ARG, "%s='%s' (from %s) is not one of %s",
                                  envname, text, source, e->choices != NULL ? e->choices : "");
            return mesh_error(MESH_ERR_INVALID_ARG, "%s='%s' (from %s) is not a valid %s", envname,
                              text, source, mesh_config_type_name(e->type));
        }
        if (!mesh_config_in_range(e, v))
            return mesh_error(MESH_ERR_INVALID_ARG, "%s='%s' (from %s) is outside %s", envname,
                              text, source, e->range);
        char why[160] = "";
        if (e->check != NULL && e->check(text, why, sizeof(why)) != 0)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s='%s' (from %s) is not valid: %s", envname,
                              text, source, why);
        if (e->type == MESH_CFG_ENUM) {
            /* Store the declared spelling of the choice so that readers compare exactly. */
            const char *p = e->choices;
            for (long long k = 0; k < v->i; k++)
                p += strcspn(p, "|") + 1;
            text = strndup(p, strcspn(p, "|"));
        } else {
            text = strdup(text);
        }
        if (text == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot store the value of %s", envname);
        v->value = text;
        v->source = source;
    }
    return MESH_OK;
}

mesh_status_t mesh_config_register(const mesh_config_table_t *table)
{
    if (table == NULL || table->entries == NULL || table->module == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "config table or its entries is NULL");
    if (table != &mesh_config_self_table)
        MESH_CHECK(mesh_config_self_register());
    /* the errors below log: logging configures itself (it registers its own table) before the
     * lock is taken, not from inside it */
    mesh_log_config_register();
    pthread_mutex_lock(&mesh_config_lock);
    mesh_status_t st = MESH_OK;
    mesh_config_value_t *values = NULL;
    if (mesh_config_registered(table))
        goto out;
    int n = atomic_load_explicit(&mesh_config_nslots, memory_order_relaxed);
    if (n == MESH_CONFIG_MAX_TABLES) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "too many config tables (%d) registering module %s",
                        MESH_CONFIG_MAX_TABLES, table->module);
        goto out;
    }
    int count = 0;
    while (table->entries[count].name != NULL)
        count++;
    values = calloc((size_t)count + 1, sizeof(*values));
    if (values == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate config table of module %s",
                        table->module);
        goto out;
    }
    MESH_CHECK_GOTO(mesh_config_file_load(), st, out);
    MESH_CHECK_GOTO(mesh_config_resolve(table, count, values), st, out);
    mesh_config_slots[n] = (mesh_config_slot_t){.table = table, .count = count, .values = values};
    atomic_store_explicit(&mesh_config_nslots, n + 1, memory_order_release);
    values = NULL;
out:
    pthread_mutex_unlock(&mesh_config_lock);
    /* Value strings of a failed table are few and short; they are not worth tracking. */
    free(values);
    return st;
}

static int mesh_config_warned_before(const char *name)
{
    for (int i = 0; i < mesh_config_nwarned; i++)
        if (strcmp(mesh_config_warned[i], name) == 0)
            return 1;
    char **w = realloc(mesh_config_warned, (size_t)(mesh_config_nwarned + 1) * sizeof(*w));
    if (w == NULL)
        return 1;
    mesh_config_warned = w;
    w[mesh_config_nwarned] = strdup(name);
    if (w[mesh_config_nwarned] != NULL)
        mesh_config_nwarned++;
    return 0;
}

void mesh_config_warn_unknown(void)
{
    char name[128];
    pthread_mutex_lock(&mesh_config_lock);
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        if (strncmp(*env, MESH_CONFIG_PREFIX, strlen(MESH_CONFIG_PREFIX)) != 0)
            continue;
        size_t len = strcspn(*env, "=");
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, *env, len);
        name[len] = '\0';
        if (mesh_config_find(name, NULL) == NULL && !mesh_config_warned_before(name))
            mesh_log_warn("unknown environment variable %s (no module declares it)", name);
    }
    for (int i = 0; i < mesh_config_file.count; i++) {
        snprintf(name, sizeof(name), MESH_CONFIG_PREFIX "%s", mesh_config_file.names[i]);
        if (mesh_config_find(name, NULL) == NULL && !mesh_config_warned_before(name))
            mesh_log_warn("unknown variable %s in %s (no module declares it)", name,
                          mesh_config_file.path);
    }
    pthread_mutex_unlock(&mesh_config_lock);
}

mesh_status_t mesh_config_self_register(void)
{
    return mesh_config_register(&mesh_config_self_table);
}

/* Value of a knob for the typed getters: unknown names are a bug in the caller. */
static const mesh_config_value_t *mesh_config_lookup(const char *name, const char *getter)
{
    const mesh_config_value_t *v = mesh_config_find(name, NULL);
    if (v == NULL)
        mesh_error(MESH_ERR_INTERNAL, "%s: no registered config table declares %s", getter,
                   name != NULL ? name : "(null)");
    return v;
}

const char *mesh_config_str(const char *name)
{
    const mesh_config_value_t *v = mesh_config_lookup(name, "mesh_config_str");
    return v != NULL ? v->value : NULL;
}

long long mesh_config_int(const char *name)
{
    const mesh_config_value_t *v = mesh_config_lookup(name, "mesh_config_int");
    return v != NULL ? v->i : 0;
}

size_t mesh_config_size(const char *name)
{
    const mesh_config_value_t *v = mesh_config_lookup(name, "mesh_config_size");
    return v != NULL ? v->size : 0;
}

double mesh_config_double(const char *name)
{
    const mesh_config_value_t *v = mesh_config_lookup(name, "mesh_config_double");
    return v != NULL ? v->d : 0.0;
}

int mesh_config_bool(const char *name)
{
    const mesh_config_value_t *v = mesh_config_lookup(name, "mesh_config_bool");
    return v != NULL ? v->i != 0 : 0;
}

void mesh_config_foreach(mesh_config_visit_fn fn, void *arg)
{
    int n = atomic_load_explicit(&mesh_config_nslots, memory_order_acquire);
    for (int s = 0; s < n; s++) {
        const mesh_config_slot_t *slot = &mesh_config_slots[s];
        for (int i = 0; i < slot->count; i++)
            fn(slot->table->module, &slot->table->entries[i], slot->values[i].value,
               slot->values[i].source, arg);
    }
}

const char *mesh_config_value(const char *name)
{
    const mesh_config_value_t *v = mesh_config_find(name, NULL);
    return v != NULL ? v->value : NULL;
}
