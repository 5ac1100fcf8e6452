/* Config tables: parsers for each type, env over file over default, validation messages that
 * name the variable, the once-only warning about unknown MESH_* variables. */
#include "tests/harness/harness.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

/* MESH_CONFIG_FILE's text: entries counted, bad lines named, an overlong line refused whole
 * (it used to be read as several lines, its tail taken for an entry of its own). */
static void check_file_text(void)
{
    int n = -1;
    const char ok[] = "# c\n\nA = 1\n  MESH_B=two words  \nC=\n";
    CHECK(mesh_config_file_parse("t.conf", ok, strlen(ok), &n) == MESH_OK && n == 3);
    CHECK(mesh_config_file_parse("t.conf", "", 0, &n) == MESH_OK && n == 0);
    const char bad[] = "A=1\nno equals\n";
    CHECK(mesh_config_file_parse("t.conf", bad, strlen(bad), &n) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "t.conf:2") != NULL);
    char longline[3000];
    memset(longline, 'x', sizeof(longline));
    memcpy(longline, "A=", 2);
    memcpy(longline + 1500, "=B\n", 3); /* read in pieces, the tail would be an entry */
    longline[sizeof(longline) - 1] = '\n';
    n = -1;
    CHECK(mesh_config_file_parse("t.conf", longline, sizeof(longline), &n) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "t.conf:1: line longer") != NULL);
    CHECK(n == -1);
}

static void check_parsers(void)
{
    long long i;
    CHECK(mesh_config_parse_int("42", &i) == MESH_OK && i == 42);
    CHECK(mesh_config_parse_int(" -7 ", &i) == MESH_OK && i == -7);
    CHECK(mesh_config_parse_int("010", &i) == MESH_OK && i == 10);
    i = 5;
    CHECK(mesh_config_parse_int("", &i) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_int("abc", &i) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_int("12x", &i) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_int("1.5", &i) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_int("99999999999999999999", &i) == MESH_ERR_INVALID_ARG);
    CHECK(i == 5); /* untouched on failure */

    size_t s;
    CHECK(mesh_config_parse_size("4096", &s) == MESH_OK && s == 4096);
    CHECK(mesh_config_parse_size("4k", &s) == MESH_OK && s == 4096);
    CHECK(mesh_config_parse_size("4K", &s) == MESH_OK && s == 4096);
    CHECK(mesh_config_parse_size("4kb", &s) == MESH_OK && s == 4096);
    CHECK(mesh_config_parse_size("1M", &s) == MESH_OK && s == 1048576);
    CHECK(mesh_config_parse_size("1m", &s) == MESH_OK && s == 1048576);
    CHECK(mesh_config_parse_size("2g", &s) == MESH_OK && s == 2147483648ull);
    CHECK(mesh_config_parse_size("3T", &s) == MESH_OK && s == 3ull << 40);
    CHECK(mesh_config_parse_size(" 8MiB ", &s) == MESH_OK && s == 8ull << 20);
    CHECK(mesh_config_parse_size("0", &s) == MESH_OK && s == 0);
    s = 9;
    CHECK(mesh_config_parse_size("", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("k", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("-1", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("4q", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("1.5k", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("4kk", &s) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_size("99999999999t", &s) == MESH_ERR_INVALID_ARG);
    CHECK(s == 9);

    double d;
    CHECK(mesh_config_parse_double("0.5", &d) == MESH_OK && d == 0.5);
    CHECK(mesh_config_parse_double("1e3", &d) == MESH_OK && d == 1000.0);
    CHECK(mesh_config_parse_double("-2", &d) == MESH_OK && d == -2.0);
    CHECK(mesh_config_parse_double("", &d) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_double("soon", &d) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_double("3s", &d) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_double("nan", &d) == MESH_ERR_INVALID_ARG);

    static const char *const yes[] = {"1", "y", "Y", "yes", "YES", "on", "On", "true", "TRUE"};
    static const char *const no[] = {"0", "n", "N", "no", "No", "off", "OFF", "false", "False"};
    for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
        int b = 0;
        CHECK_MSG(mesh_config_parse_bool(yes[k], &b) == MESH_OK && b == 1, "%s", yes[k]);
        CHECK_MSG(mesh_config_parse_bool(no[k], &b) == MESH_OK && b == 0, "%s", no[k]);
    }
    int b = 7;
    CHECK(mesh_config_parse_bool("", &b) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_bool("2", &b) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_config_parse_bool("maybe", &b) == MESH_ERR_INVALID_ARG);
    CHECK(b == 7);
}

/* A bad MESH_TIMEOUT makes the core table, hence the context, fail, naming the variable. Runs
 * in a child because the context initialises once per process. */
static void check_bad_timeout(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("MESH_TIMEOUT", "soon", 1);
        setenv("MESH_LOG_FILE", "/dev/null", 1);
        /* the core table failed, so its log file is unknown: the message goes to stderr */
        int devnull = open("/dev/null", O_WRONLY);
        CHECK(devnull >= 0 && dup2(devnull, 2) == 2);
        if (mesh_context_init() != MESH_ERR_INVALID_ARG)
            _exit(2);
        if (strstr(mesh_error_last(), "MESH_TIMEOUT") == NULL ||
            strstr(mesh_error_last(), "'soon'") == NULL) {
            fprintf(stderr, "message: %s\n", mesh_error_last());
            _exit(3);
        }
        if (mesh_context_init() != MESH_ERR_INVALID_ARG) /* the first result sticks */
            _exit(4);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);

    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("MESH_TIMEOUT", "-1", 1);
        setenv("MESH_LOG_FILE", "/dev/null", 1);
        _exit(mesh_context_init() == MESH_ERR_INVALID_ARG &&
                      strstr(mesh_error_last(), "MESH_TIMEOUT") != NULL
                  ? 0
                  : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static const mesh_config_entry_t test_entries[] = {
    {.name = "T_INT", .dflt = "1", .type = MESH_CFG_INT, .doc = "int"},
    {.name = "T_SIZE", .dflt = "4k", .type = MESH_CFG_SIZE, .doc = "size"},
    {.name = "T_DOUBLE", .dflt = "0.25", .type = MESH_CFG_DOUBLE, .doc = "double"},
    {.name = "T_BOOL", .dflt = "no", .type = MESH_CFG_BOOL, .doc = "bool"},
    {.name = "T_ENUM",
     .dflt = "slow",
     .type = MESH_CFG_ENUM,
     .choices = "slow|fast|auto",
     .doc = "enum"},
    {.name = "T_STR", .dflt = "", .type = MESH_CFG_STRING, .doc = "string"},
    {.name = "T_FILE", .dflt = "3", .type = MESH_CFG_INT, .doc = "set in the file"},
    {.name = "T_DEFAULT", .dflt = "1M", .type = MESH_CFG_SIZE, .doc = "left alone"},
    {.name = NULL},
};
static const mesh_config_table_t test_table = {.module = "test", .entries = test_entries};

static const mesh_config_entry_t bad_int_entries[] = {
    {.name = "T_BAD_INT", .dflt = "1", .type = MESH_CFG_INT, .doc = "int"},
    {.name = NULL},
};
static const mesh_config_table_t bad_int_table = {.module = "bad", .entries = bad_int_entries};
static const mesh_config_entry_t bad_enum_entries[] = {
    {.name = "T_BAD_ENUM", .dflt = "a", .type = MESH_CFG_ENUM, .choices = "a|b", .doc = "enum"},
    {.name = NULL},
};
static const mesh_config_table_t bad_enum_table = {.module = "bad2", .entries = bad_enum_entries};
static const mesh_config_entry_t bad_size_entries[] = {
    {.name = "T_BAD_SIZE", .dflt = "1", .type = MESH_CFG_SIZE, .doc = "size"},
    {.name = NULL},
};
static const mesh_config_table_t bad_size_table = {.module = "bad3", .entries = bad_size_entries};
static const mesh_config_entry_t dup_entries[] = {
    {.name = "T_INT", .dflt = "1", .type = MESH_CFG_INT, .doc = "declared twice"},
    {.name = NULL},
};
static const mesh_config_table_t dup_table = {.module = "dup", .entries = dup_entries};

/* Ranges and checks: a value outside the range, or one its check refuses, fails registration
 * naming the variable, the value and what is allowed. */
static int check_even(const char *value, char *why, size_t len)
{
    if (atoi(value) % 2 == 0)
        return 0;
    snprintf(why, len, "an even number");
    return -1;
}
static const mesh_config_entry_t range_entries[] = {
    {.name = "T_RANGE_INT", .dflt = "3", .type = MESH_CFG_INT, .doc = "int", .range = "1..10"},
    {.name = "T_RANGE_SIZE", .dflt = "4k", .type = MESH_CFG_SIZE, .doc = "size", .range = "4k.."},
    {.name = "T_RANGE_DBL", .dflt = "0.5", .type = MESH_CFG_DOUBLE, .doc = "dbl", .range = "..1"},
    {.name = "T_CHECKED", .dflt = "2", .type = MESH_CFG_STRING, .doc = "str", .check = check_even},
    {.name = NULL},
};

static void check_ranges(void)
{
    static const struct {
        const char *var, *value, *want;
    } bad[] = {
        {"MESH_T_RANGE_INT", "11", "MESH_T_RANGE_INT='11' (from env) is outside 1..10"},
        {"MESH_T_RANGE_INT", "0", "is outside 1..10"},
        {"MESH_T_RANGE_INT", "-4", "is outside 1..10"},
        {"MESH_T_RANGE_SIZE", "4095", "MESH_T_RANGE_SIZE='4095' (from env) is outside 4k.."},
        {"MESH_T_RANGE_DBL", "1.5", "is outside ..1"},
        {"MESH_T_CHECKED", "3", "MESH_T_CHECKED='3' (from env) is not valid: an even number"}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            static const mesh_config_table_t range_table = {"range", range_entries};
            int devnull = open("/dev/null", O_WRONLY);
            CHECK(devnull >= 0 && dup2(devnull, 2) == 2);
            setenv(bad[k].var, bad[k].value, 1);
            if (mesh_config_register(&range_table) != MESH_ERR_INVALID_ARG)
                _exit(2);
            _exit(strstr(mesh_error_last(), bad[k].want) != NULL ? 0 : 3);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s=%s: child status %d",
                  bad[k].var, bad[k].value, status);
    }
}

typedef struct {
    int seen;
    int core_seen;
    char sources[8][16];
} visit_t;

static void visit(const char *module, const mesh_config_entry_t *e, const char *value,
                  const char *source, void *arg)
{
    visit_t *v = arg;
    CHECK(value != NULL && source != NULL && e->doc != NULL);
    /* the base services' tables, one per module */
    static const char *const base[] = {"config", "log", "core", "progress", "reduce", "sock"};
    for (int i = 0; i < 6; i++)
        if (strcmp(module, base[i]) == 0)
            v->core_seen++;
    if (strcmp(module, "test") != 0)
        return;
    CHECK(v->seen < 8);
    CHECK(strcmp(e->name, test_entries[v->seen].name) == 0);
    snprintf(v->sources[v->seen], sizeof(v->sources[0]), "%s", source);
    v->seen++;
}

static char *read_file(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

int main(void)
{
    check_parsers();
    check_bad_timeout();
    check_ranges();

    char dir[4096], logpath[4200], cfgpath[4200];
    th_tmpdir(dir, sizeof(dir), "mesh-test-config");
    snprintf(logpath, sizeof(logpath), "%s/log", dir);
    snprintf(cfgpath, sizeof(cfgpath), "%s/mesh.conf", dir);
    FILE *f = fopen(cfgpath, "w");
    CHECK(f != NULL);
    fprintf(f, "# test configuration\n\n"
               "T_INT = 9\n"
               "MESH_T_SIZE=2g\n"
               "  T_FILE=77  \n"
               "T_STR=from file # not a comment\n"
               "T_FILE_UNKNOWN=1\n");
    fclose(f);

    setenv("MESH_LOG_FILE", logpath, 1);
    setenv("MESH_LOG_LEVEL", "warn", 1);
    setenv("MESH_CONFIG_FILE", cfgpath, 1);
    setenv("MESH_T_INT", "5", 1);
    setenv("MESH_T_DOUBLE", "1.5e2", 1);
    setenv("MESH_T_BOOL", "On", 1);
    setenv("MESH_T_ENUM", "FAST", 1);
    setenv("MESH_FOO_UNKNOWN", "1", 1);
    setenv("MESH_T_BAD_INT", "12abc", 1);
    setenv("MESH_T_BAD_ENUM", "c", 1);
    setenv("MESH_T_BAD_SIZE", "4 k", 1);
    setenv("MESH_NODE_ID", "node-a", 1);
    setenv("MESH_PROGRESS_SPIN", "5", 1);

    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_config_register(&test_table) == MESH_OK);
    CHECK(mesh_config_register(&test_table) == MESH_OK); /* idempotent */

    CHECK(mesh_config_int("T_INT") == 5);               /* env over file */
    CHECK(mesh_config_size("T_SIZE") == 2147483648ull); /* file (MESH_ form) */
    CHECK(mesh_config_double("T_DOUBLE") == 150.0);
    CHECK(mesh_config_bool("T_BOOL") == 1);
    CHECK(strcmp(mesh_config_str("T_ENUM"), "fast") == 0); /* declared spelling */
    CHECK(mesh_config_int("T_ENUM") == 1);                 /* index of the choice */
    CHECK(strcmp(mesh_config_str("T_STR"), "from file # not a comment") == 0);
    CHECK(mesh_config_int("T_FILE") == 77);          /* file over default */
    CHECK(mesh_config_size("T_DEFAULT") == 1048576); /* default */
    CHECK(strcmp(mesh_config_str("T_DEFAULT"), "1M") == 0);
    CHECK(strcmp(mesh_config_get("T_INT"), "5") == 0);
    CHECK(strcmp(mesh_config_get("MESH_T_FILE"), "77") == 0);
    CHECK(mesh_config_get("T_NOPE") == NULL);

    const char *timeout = getenv("MESH_TIMEOUT");
    CHECK(strcmp(mesh_config_get("TIMEOUT"), timeout != NULL ? timeout : "300") == 0);
    CHECK(mesh_default_timeout() == mesh_config_double("TIMEOUT"));
    CHECK(strcmp(mesh_config_str("LOG_LEVEL"), "warn") == 0);

    visit_t v = {0};
    mesh_config_foreach(visit, &v);
    CHECK(v.seen == 8);
    CHECK(v.core_seen == 14);
    static const char *const sources[] = {"env", "file", "env",  "env",
                                          "env", "file", "file", "default"};
    for (int i = 0; i < 8; i++)
        CHECK_MSG(strcmp(v.sources[i], sources[i]) == 0, "%s: %s", test_entries[i].name,
                  v.sources[i]);

    /* Unknown getters return 0 and log an internal error. */
    CHECK(mesh_config_int("T_NOPE") == 0);
    CHECK(mesh_config_size("T_NOPE") == 0);
    CHECK(mesh_config_double("T_NOPE") == 0.0);
    CHECK(mesh_config_bool("T_NOPE") == 0);
    CHECK(mesh_config_str("T_NOPE") == NULL);
    CHECK(strstr(mesh_error_last(), "T_NOPE") != NULL);

    /* Bad values fail registration, naming the variable and the value. */
    CHECK(mesh_config_register(&bad_int_table) == MESH_ERR_INVALID_ARG);
    CHECK_MSG(strstr(mesh_error_last(), "MESH_T_BAD_INT='12abc'") != NULL, "%s", mesh_error_last());
    CHECK(mesh_config_get("T_BAD_INT") == NULL);
    CHECK(mesh_config_register(&bad_enum_table) == MESH_ERR_INVALID_ARG);
    CHECK_MSG(strstr(mesh_error_last(), "MESH_T_BAD_ENUM='c'") != NULL &&
                  strstr(mesh_error_last(), "a|b") != NULL,
              "%s", mesh_error_last());
    CHECK(mesh_config_register(&bad_size_table) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "MESH_T_BAD_SIZE='4 k'") != NULL);
    setenv("MESH_T_BAD_INT", "-12", 1);
    CHECK(mesh_config_register(&bad_int_table) == MESH_OK);
    CHECK(mesh_config_int("T_BAD_INT") == -12);
    CHECK(mesh_config_register(&dup_table) == MESH_ERR_INTERNAL);

    /* Unknown variables: one warning each, however often asked. */
    mesh_config_warn_unknown();
    mesh_config_warn_unknown();
    const char *log = read_file(logpath);
    CHECK_MSG(count(log, "unknown environment variable MESH_FOO_UNKNOWN") == 1, "%s", log);
    CHECK_MSG(count(log, "MESH_T_FILE_UNKNOWN in ") == 1, "%s", log);
    CHECK(strstr(log, "variable MESH_T_INT ") == NULL);
    CHECK(strstr(log, "variable MESH_LOG_FILE ") == NULL);
    CHECK(strstr(log, "variable MESH_T_BAD_ENUM") != NULL); /* its table never registered */
    CHECK(strstr(log, "mesh WARN config: MESH_T_BAD_INT='12abc' (from env) is not a valid "
                      "integer") != NULL);
    CHECK(strstr(log, "mesh ERROR config: mesh_config_int: no registered config table declares "
                      "T_NOPE") != NULL);

    /* Core context values. */
    CHECK(strcmp(mesh_context_node_name(), "node-a") == 0);
    CHECK(mesh_context_pidns() != 0);
    CHECK(strcmp(mesh_config_str("PROGRESS_SPIN"), "5") == 0);

    /* Backoff: counts idle polls, spins first (200 pauses), then sleeps (at least 1 us each,
     * growing to 100 us); it never yields. */
    unsigned idle = 0;
    double t0 = mesh_time();
    for (int k = 0; k < 200; k++)
        mesh_backoff(&idle);
    CHECK(idle == 200);
    double t1 = mesh_time();
    for (int k = 0; k < 100; k++)
        mesh_backoff(&idle);
    double t2 = mesh_time();
    CHECK(t0 <= t1 && t1 <= t2);
    CHECK_MSG(t2 - t1 >= 2e-3, "100 sleeping backoffs took %g s", t2 - t1);

    unlink(logpath);
    unlink(cfgpath);
    rmdir(dir);
    check_file_text();
    return 0;
}
