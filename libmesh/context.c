/* The process-wide context: core knobs, node identity and the registry of objects that
 * mesh_progress() drives. */
#include "libmesh/context.h"
#include "libmesh/progress.h"
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include "libmesh/config.h"
#include "libmesh/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const mesh_config_entry_t mesh_context_entries[] = {
    {.name = "LOG_LEVEL", .dflt = "warn", .type = MESH_CFG_ENUM,
     .choices = "error|warn|info|debug|trace",
     .doc = "Least severe level of the messages printed."},
    {.name = "LOG_SUBSYS", .dflt = "", .type = MESH_CFG_STRING,
     .doc = "Comma-separated subsystems whose messages are printed (core, tcp, shm, coll, ...); "
            "empty: all. Errors are always printed."},
    {.name = "LOG_FILE", .dflt = "", .type = MESH_CFG_STRING,
     .doc = "File that receives the log instead of stderr; %h expands to the host name, %p to "
            "the process id."},
    {.name = "CONFIG_FILE", .dflt = "", .type = MESH_CFG_STRING,
     .doc = "File of NAME=value lines read for knobs not set in the environment (only the "
            "environment sets this one)."},
    {.name = "TIMEOUT", .dflt = "300", .type = MESH_CFG_DOUBLE,
     .doc = "Seconds a blocking operation may go without progress before it fails with a "
            "timeout that names the ranks it waits for."},
    {.name = "NODE_ID", .dflt = "", .type = MESH_CFG_STRING,
     .doc = "Label of this node; ranks with the same label share memory. Empty: the host name."},
    {.name = "PROGRESS_SPIN", .dflt = "auto", .type = MESH_CFG_STRING,
     .doc = "Idle polls a waiting rank spins before it yields the core to others. auto: 20000 "
            "(about a millisecond) while the ranks on this machine (simulated nodes included) do "
            "not outnumber the CPUs a rank may run on, 200 when they do or before a communicator "
            "says. A longer spin yields once every 16384 polls."},
    {.name = "PROGRESS_THREAD", .dflt = "0", .type = MESH_CFG_BOOL,
     .doc = "Runs one thread per process that progresses every communicator with operations "
            "under way, so that operations started nonblocking complete while the caller "
            "computes without calling mesh_test or mesh_wait. It spins while operations wait "
            "for peers: for callers that compute for long between calls, with a core to spare."},
    {.name = "REDUCE_AVX2", .dflt = "yes", .type = MESH_CFG_BOOL,
     .doc = "Use the AVX2 loops for fp16 and bf16 reductions when the CPU has AVX2 and F16C."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_context_table = {
    .module = "core",
    .entries = mesh_context_entries,
};

static pthread_once_t mesh_context_once = PTHREAD_ONCE_INIT;
static mesh_status_t mesh_context_status;
static __thread int mesh_context_initialising;
static char mesh_context_node[256];
static unsigned long long mesh_context_ns;

static mesh_status_t mesh_context_check_values(void)
{
    double timeout = mesh_config_double("TIMEOUT");
    if (!(timeout > 0))
        return mesh_error(MESH_ERR_INVALID_ARG, "MESH_TIMEOUT='%s' must be a positive number of "
                          "seconds", mesh_config_str("TIMEOUT"));
    if (mesh_progress_spin_parse(mesh_config_str("PROGRESS_SPIN"), NULL) != 0)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "MESH_PROGRESS_SPIN='%s' must be auto or a non-negative number of polls",
                          mesh_config_str("PROGRESS_SPIN"));
    return MESH_OK;
}

static void mesh_context_do_init(void)
{
    mesh_context_initialising = 1;
    mesh_status_t st = mesh_config_register(&mesh_context_table);
    /* Logging uses the table when it registered, its defaults otherwise. */
    mesh_log_configure();
    if (st == MESH_OK)
        st = mesh_context_check_values();

    const char *node = st == MESH_OK ? mesh_config_str("NODE_ID") : "";
    if (node != NULL && node[0] != '\0') {
        snprintf(mesh_context_node, sizeof(mesh_context_node), "%s", node);
    } else if (gethostname(mesh_context_node, sizeof(mesh_context_node) - 1) != 0 ||
               mesh_context_node[0] == '\0') {
        snprintf(mesh_context_node, sizeof(mesh_context_node), "localhost");
    }

    /* the pid namespace inode alone repeats across hosts (every host's initial namespace has
     * the same one), so mix in this boot's id: equal values mean "same kernel, same pids" */
    struct stat sb;
    unsigned long long ns = stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
    char boot[64] = "";
    int bfd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (bfd >= 0) {
        ssize_t n = read(bfd, boot, sizeof(boot) - 1);
        if (n > 0) boot[n] = '\0';
        close(bfd);
    }
    for (const char *c = boot; ns && *c; c++) ns = (ns ^ (unsigned char)*c) * 0x100000001b3ull;
    mesh_context_ns = ns;
    mesh_context_status = st;
    mesh_context_initialising = 0;
}

mesh_status_t mesh_context_init(void)
{
    /* Registration and logging below call back here; the inner calls must not wait on the
     * once-control their own thread holds. */
    if (mesh_context_initialising)
        return MESH_OK;
    pthread_once(&mesh_context_once, mesh_context_do_init);
    return mesh_context_status;
}

const char *mesh_context_node_name(void)
{
    mesh_context_init();
    return mesh_context_node;
}

unsigned long long mesh_context_pidns(void)
{
    mesh_context_init();
    return mesh_context_ns;
}

int mesh_context_pid_gone(int pid, unsigned long long pidns)
{
    if (pid <= 0 || pidns == 0 || pidns != mesh_context_pidns()) return 0;
    if (kill(pid, 0) == -1) return errno == ESRCH;
    /* a killed process stays a zombie until its parent reaps it, and a zombie still answers
     * kill(pid, 0); its state in /proc tells */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}
