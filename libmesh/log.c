/* Logging and the per-thread last-error message. Lines are formatted whole and written with one
 * write() so that lines of concurrent threads and processes do not interleave. */
#include "libmesh/log.h"
#include "libmesh/config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MESH_LOG_MAX_SUBSYS 16
#define MESH_ERROR_MAX      512

/* Subsystem filter; replaced as a whole so readers never see a half-written one. */
typedef struct {
    int all;
    int count;
    char names[MESH_LOG_MAX_SUBSYS][32];
} mesh_log_filter_t;

static const char *const mesh_log_level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static atomic_int mesh_log_level_cur = MESH_LOG_WARN;
static atomic_int mesh_log_ready; /* configured from the config table */
static atomic_int mesh_log_fd = STDERR_FILENO;
static _Atomic(mesh_log_filter_t *) mesh_log_filter; /* NULL: every subsystem */
static char mesh_log_host[64];
static pthread_mutex_t mesh_log_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread int mesh_log_in_init;
static __thread char mesh_error_buf[MESH_ERROR_MAX];

/* Every subsystem that logs; MESH_LOG_SUBSYS may name only these. */
static const char *const mesh_log_subsystems[] = {
    "core", "config", "sock", "bootstrap", "topo", "grid", "tl",    "self",     "shm",
    "tcp",  "ucx",    "ofi",  "verbs",     "comm", "coll", "sched", "parallel", NULL};

static int mesh_log_check_subsys(const char *value, char *why, size_t len)
{
    for (const char *p = value; *p;) {
        size_t n = strcspn(p, ", ");
        int known = n == 0 || (n == 3 && strncmp(p, "all", 3) == 0);
        for (int i = 0; !known && mesh_log_subsystems[i]; i++)
            known =
                strlen(mesh_log_subsystems[i]) == n && strncmp(mesh_log_subsystems[i], p, n) == 0;
        if (!known) {
            size_t off =
                (size_t)snprintf(why, len, "unknown subsystem '%.*s'; known: all", (int)n, p);
            for (int i = 0; mesh_log_subsystems[i] && off < len; i++)
                off += (size_t)snprintf(why + off, len - off, ",%s", mesh_log_subsystems[i]);
            return -1;
        }
        p += n;
        p += strspn(p, ", ");
    }
    return 0;
}

static const mesh_config_entry_t mesh_log_entries[] = {
    {.name = "LOG_LEVEL",
     .dflt = "warn",
     .type = MESH_CFG_ENUM,
     .choices = "error|warn|info|debug|trace",
     .doc = "Least severe level of the messages printed."},
    {.name = "LOG_SUBSYS",
     .dflt = "",
     .type = MESH_CFG_STRING,
     .check = mesh_log_check_subsys,
     .doc = "Comma-separated subsystems whose messages are printed (core, config, sock, "
            "bootstrap, topo, grid, tl, self, shm, tcp, ucx, ofi, verbs, comm, coll, sched, "
            "parallel); empty or all: every one. Errors are always printed."},
    {.name = "LOG_FILE",
     .dflt = "",
     .type = MESH_CFG_STRING,
     .doc = "File that receives the log instead of stderr (or stdout); %h expands to the host "
            "name, %p to the process id."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_log_table = {"log", mesh_log_entries};

static pthread_once_t mesh_log_once = PTHREAD_ONCE_INIT;
static mesh_status_t mesh_log_status;

static void mesh_log_init_once(void)
{
    mesh_log_in_init = 1;
    mesh_log_status = mesh_config_register(&mesh_log_table);
    if (mesh_log_status == MESH_OK)
        mesh_log_configure();
    mesh_log_in_init = 0;
}

mesh_status_t mesh_log_config_register(void)
{
    /* messages logged while the table registers (an invalid value) use the defaults */
    if (mesh_log_in_init)
        return MESH_OK;
    int saved = errno;
    pthread_once(&mesh_log_once, mesh_log_init_once);
    errno = saved;
    return mesh_log_status;
}

/* Configures logging from its table the first time anything logs; until then, and when the
 * table holds an invalid value, the defaults apply: warn level, stderr. */
static void mesh_log_ensure(void)
{
    if (!atomic_load_explicit(&mesh_log_ready, memory_order_acquire))
        mesh_log_config_register();
}

int mesh_log_enabled(mesh_log_level_t level, const char *subsys)
{
    mesh_log_ensure();
    if ((int)level > atomic_load_explicit(&mesh_log_level_cur, memory_order_relaxed))
        return 0;
    const mesh_log_filter_t *f = atomic_load_explicit(&mesh_log_filter, memory_order_acquire);
    if (f == NULL || f->all || level == MESH_LOG_ERROR)
        return 1;
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->names[i], subsys) == 0)
            return 1;
    return 0;
}

static mesh_log_filter_t *mesh_log_parse_filter(const char *text)
{
    mesh_log_filter_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    const char *p = text;
    while (*p != '\0') {
        size_t len = strcspn(p, ", ");
        if (len > 0 && f->count < MESH_LOG_MAX_SUBSYS && len < sizeof(f->names[0])) {
            memcpy(f->names[f->count], p, len);
            if (strcmp(f->names[f->count], "all") == 0)
                f->all = 1;
            f->count++;
        }
        p += len;
        p += strspn(p, ", ");
    }
    if (f->count == 0)
        f->all = 1;
    return f;
}

/* Expands %h (host) and %p (pid) in a log file name. */
static void mesh_log_expand_name(const char *pattern, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = pattern; *p != '\0' && n + 1 < len; p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int w = p[1] == 'h' ? snprintf(out + n, len - n, "%s", mesh_log_host)
                                : snprintf(out + n, len - n, "%d", (int)getpid());
            n += w > 0 ? (size_t)w : 0;
            if (n >= len)
                n = len - 1;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static void mesh_log_init_host(void)
{
    if (mesh_log_host[0] != '\0')
        return;
    char host[sizeof(mesh_log_host)] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "localhost");
    host[strcspn(host, ".")] = '\0';
    memcpy(mesh_log_host, host, sizeof(host));
}

void mesh_log_configure(void)
{
    int saved = errno;
    pthread_mutex_lock(&mesh_log_lock);
    mesh_log_init_host();

    const char *level = mesh_config_value("LOG_LEVEL");
    if (level != NULL) {
        for (int i = 0; i <= MESH_LOG_TRACE; i++)
            if (strcasecmp(level, mesh_log_level_names[i]) == 0)
                atomic_store(&mesh_log_level_cur, i);
    }

    const char *subsys = mesh_config_value("LOG_SUBSYS");
    mesh_log_filter_t *f = mesh_log_parse_filter(subsys != NULL ? subsys : "");
    /* The previous filter may still be read by another thread; it is small, so it is kept. */
    if (f != NULL)
        atomic_store_explicit(&mesh_log_filter, f, memory_order_release);

    const char *file = mesh_config_value("LOG_FILE");
    int fd = STDERR_FILENO;
    if (file != NULL && file[0] != '\0' && strcmp(file, "stderr") != 0) {
        if (strcmp(file, "stdout") == 0) {
            fd = STDOUT_FILENO;
        } else {
            char name[512];
            mesh_log_expand_name(file, name, sizeof(name));
            fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0) {
                fd = STDERR_FILENO;
                dprintf(fd, "[%s:%d] mesh WARN core: cannot open log file '%s': %m\n",
                        mesh_log_host, (int)getpid(), name);
            }
        }
    }
    int old = atomic_exchange(&mesh_log_fd, fd);
    if (old > STDERR_FILENO && old != fd)
        close(old);
    atomic_store_explicit(&mesh_log_ready, 1, memory_order_release);
    pthread_mutex_unlock(&mesh_log_lock);
    errno = saved;
}

static void mesh_log_vemit(mesh_log_level_t level, const char *subsys, const char *file, int line,
                           int saved_errno, const char *fmt, va_list ap)
{
    char buf[2048];
    if (mesh_log_host[0] == '\0')
        mesh_log_init_host();
    const char *base = strrchr(file, '/');
    base = base != NULL ? base + 1 : file;
    if ((unsigned)level > MESH_LOG_TRACE)
        level = MESH_LOG_TRACE;

    int n = snprintf(buf, sizeof(buf), "[%s:%d] mesh %s %s: ", mesh_log_host, (int)getpid(),
                     mesh_log_level_names[level], subsys);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    errno = saved_errno; /* so that %m names the caller's error */
    n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
    if (n > 0)
        len += (size_t)n;
    /* Keep room for the location and the newline even when the message was cut. */
    const size_t tail = 96;
    if (len > sizeof(buf) - tail)
        len = sizeof(buf) - tail;
    n = snprintf(buf + len, sizeof(buf) - len, " (%s:%d)\n", base, line);
    if (n > 0)
        len += (size_t)n < sizeof(buf) - len ? (size_t)n : sizeof(buf) - len - 1;

    int fd = atomic_load_explicit(&mesh_log_fd, memory_order_relaxed);
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        len -= (size_t)w;
    }
}

void mesh_log_emit(mesh_log_level_t level, const char *subsys, const char *file, int line,
                   const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    mesh_log_vemit(level, subsys, file, line, saved, fmt, ap);
    va_end(ap);
    errno = saved;
}

static void mesh_log_emit_text(mesh_log_level_t level, const char *subsys, const char *file,
                               int line, int saved_errno, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mesh_log_vemit(level, subsys, file, line, saved_errno, fmt, ap);
    va_end(ap);
}

mesh_status_t mesh_error_set_(mesh_status_t status, const char *subsys, const char *file, int line,
                              const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mesh_error_buf, sizeof(mesh_error_buf), fmt, ap);
    va_end(ap);

    mesh_log_level_t level = status == MESH_ERR_INVALID_ARG ? MESH_LOG_WARN : MESH_LOG_ERROR;
    if (mesh_log_enabled(level, subsys))
        mesh_log_emit_text(level, subsys, file, line, saved, "%s", mesh_error_buf);
    errno = saved;
    return status;
}

mesh_status_t mesh_error_report(mesh_status_t status, const char *fmt, ...)
{
    /* the arguments may point into this thread's buffer (its previous message) */
    char msg[sizeof(mesh_error_buf)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return mesh_error_set_(status, "parallel", __FILE__, __LINE__, "%s", msg);
}

const char *mesh_error_last(void)
{
    return mesh_error_buf;
}

void mesh_error_restore(const char *msg)
{
    if (msg != mesh_error_buf)
        snprintf(mesh_error_buf, sizeof(mesh_error_buf), "%s", msg);
}

void mesh_error_clear(void)
{
    mesh_error_buf[0] = '\0';
}
