/* Logging: line format, level and subsystem filters, the log file name pattern, %m, and the
 * per-thread last error. Output goes to MESH_LOG_FILE and is read back. */
#define MESH_LOG_SUBSYSTEM "tcp"
#include "tests/harness/harness.h"
#include "libmesh/context.h"
#include "libmesh/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text != '\0'; text++)
        n += *text == '\n';
    return n;
}

static void *other_thread(void *arg)
{
    (void)arg;
    /* The last error is per thread. */
    CHECK(strcmp(mesh_error_last(), "") == 0);
    mesh_error(MESH_ERR_TIMEOUT, "thread error");
    CHECK(strcmp(mesh_error_last(), "thread error") == 0);
    return NULL;
}

int main(void)
{
    char dir[4096], pattern[4200], path[4200];
    th_tmpdir(dir, sizeof(dir), "mesh-test-log");
    snprintf(pattern, sizeof(pattern), "%s/log-%%h-%%p.txt", dir);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0';
    snprintf(path, sizeof(path), "%s/log-%s-%d.txt", dir, host, (int)getpid());

    setenv("MESH_LOG_FILE", pattern, 1);
    setenv("MESH_LOG_LEVEL", "DEBUG", 1);
    setenv("MESH_LOG_SUBSYS", "core,tcp", 1);
    unsetenv("MESH_CONFIG_FILE");

    /* The first message configures logging by itself. */
    int line_first = __LINE__ + 1;
    mesh_log_warn("first message %d", 42);
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_log_enabled(MESH_LOG_DEBUG, "tcp"));
    CHECK(!mesh_log_enabled(MESH_LOG_TRACE, "tcp"));
    CHECK(!mesh_log_enabled(MESH_LOG_WARN, "shm"));
    CHECK(mesh_log_enabled(MESH_LOG_ERROR, "shm")); /* errors pass every filter */
    CHECK(mesh_log_enabled(MESH_LOG_INFO, "core"));

    mesh_log_trace("hidden trace");
    mesh_log_debug("shown debug");
    if (mesh_log_enabled(MESH_LOG_WARN, "shm"))
        mesh_log_emit(MESH_LOG_WARN, "shm", __FILE__, __LINE__, "hidden shm");

    errno = ENOENT;
    int line_m = __LINE__ + 1;
    mesh_log_info("open failed: %m");
    CHECK(errno == ENOENT);

    CHECK(strcmp(mesh_error_last(), "") == 0);
    errno = EACCES;
    int line_err = __LINE__ + 1;
    mesh_status_t st = mesh_error(MESH_ERR_IO, "cannot read %s: %m", "x.bin");
    CHECK(st == MESH_ERR_IO);
    CHECK(errno == EACCES);
    CHECK_MSG(strcmp(mesh_error_last(), "cannot read x.bin: Permission denied") == 0, "'%s'",
              mesh_error_last());
    st = mesh_error(MESH_ERR_INVALID_ARG, "count %d is negative", -3);
    CHECK(st == MESH_ERR_INVALID_ARG);
    CHECK(strcmp(mesh_error_last(), "count -3 is negative") == 0);

    /* Long messages are cut, not overflowed. */
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mesh_error(MESH_ERR_INTERNAL, "%s", big);
    CHECK(strlen(mesh_error_last()) == 511);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(strlen(mesh_error_last()) == 511);
    mesh_error_clear();
    CHECK(strcmp(mesh_error_last(), "") == 0);

    const char *text = read_file(path);
    char expect[512];
    snprintf(expect, sizeof(expect), "[%s:%d] mesh WARN tcp: first message 42 (test_log.c:%d)\n",
             host, (int)getpid(), line_first);
    CHECK_MSG(strncmp(text, expect, strlen(expect)) == 0, "got:\n%s\nexpected:\n%s", text, expect);
    CHECK(strstr(text, "hidden") == NULL);
    CHECK(strstr(text, "mesh DEBUG tcp: shown debug (test_log.c:") != NULL);
    snprintf(expect, sizeof(expect), "mesh INFO tcp: open failed: %s (test_log.c:%d)\n",
             strerror(ENOENT), line_m);
    CHECK_MSG(strstr(text, expect) != NULL, "missing '%s' in:\n%s", expect, text);
    snprintf(expect, sizeof(expect),
             "mesh ERROR tcp: cannot read x.bin: Permission denied (test_log.c:%d)\n", line_err);
    CHECK_MSG(strstr(text, expect) != NULL, "missing '%s' in:\n%s", expect, text);
    CHECK(strstr(text, "mesh WARN tcp: count -3 is negative (test_log.c:") != NULL);
    CHECK(strstr(text, "mesh ERROR tcp: thread error (test_log.c:") != NULL);
    CHECK(strstr(text, "mesh ERROR tcp: aaaa") != NULL);
    CHECK_MSG(count_lines(text) == 7, "%d lines:\n%s", count_lines(text), text);

    unlink(path);
    rmdir(dir);
    return 0;
}
