/* Logging: MESH_LOG_LEVEL, MESH_LOG_SUBSYS, MESH_LOG_FILE. Messages are lowercase, no trailing
 * newline; glibc's %m prints strerror(errno). A file sets MESH_LOG_SUBSYSTEM before including
 * this header to name its subsystem ("core" otherwise). */
#ifndef MESH_LOG_H
#define MESH_LOG_H

#include "mesh.h"

typedef enum {
    MESH_LOG_ERROR = 0,
    MESH_LOG_WARN,
    MESH_LOG_INFO,
    MESH_LOG_DEBUG,
    MESH_LOG_TRACE
} mesh_log_level_t;

#ifndef MESH_LOG_SUBSYSTEM
#define MESH_LOG_SUBSYSTEM "core"
#endif

int mesh_log_enabled(mesh_log_level_t level, const char *subsys);
void mesh_log_emit(mesh_log_level_t level, const char *subsys, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Registers the log's config table (MESH_LOG_*) and configures logging from it, once; logging
 * does so itself when it first logs. */
mesh_status_t mesh_log_config_register(void);
/* Re-reads MESH_LOG_* from the registered table. */
void mesh_log_configure(void);

#define mesh_log(level, ...)                                                                       \
    do {                                                                                           \
        if (mesh_log_enabled(level, MESH_LOG_SUBSYSTEM))                                           \
            mesh_log_emit(level, MESH_LOG_SUBSYSTEM, __FILE__, __LINE__, __VA_ARGS__);             \
    } while (0)
#define mesh_log_error(...) mesh_log(MESH_LOG_ERROR, __VA_ARGS__)
#define mesh_log_warn(...)  mesh_log(MESH_LOG_WARN, __VA_ARGS__)
#define mesh_log_info(...)  mesh_log(MESH_LOG_INFO, __VA_ARGS__)
#define mesh_log_debug(...) mesh_log(MESH_LOG_DEBUG, __VA_ARGS__)
#define mesh_log_trace(...) mesh_log(MESH_LOG_TRACE, __VA_ARGS__)

/*
 * Records the message of an error this thread detected (readable through
 * mesh_comm_last_error(NULL) and copied to the communicator by the API layer), logs it once
 * (warn for MESH_ERR_INVALID_ARG, error otherwise) and returns status, so detection sites read
 *     return mesh_error(MESH_ERR_INVALID_ARG, "count %zu is too large", count);
 */
#define mesh_error(status, ...)                                                                    \
    mesh_error_set_(status, MESH_LOG_SUBSYSTEM, __FILE__, __LINE__, __VA_ARGS__)
mesh_status_t mesh_error_set_(mesh_status_t status, const char *subsys, const char *file, int line,
                              const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* This thread's last error message ("" when none); mesh_error_clear() resets it. */
const char *mesh_error_last(void);
void mesh_error_clear(void);
/* Makes msg this thread's last error without logging it again (another thread detected it). */
void mesh_error_restore(const char *msg);

#define MESH_CHECK(expr)                                                                           \
    do {                                                                                           \
        mesh_status_t _st = (expr);                                                                \
        if (_st < 0)                                                                               \
            return _st;                                                                            \
    } while (0)
#define MESH_CHECK_GOTO(expr, st, label)                                                           \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) < 0)                                                                              \
            goto label;                                                                            \
    } while (0)

#endif
