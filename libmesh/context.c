/* The process-wide context: it registers the base services' tables and knows this host's
 * identity (node label, pid namespace). The services below it (configuration, log, progress,
 * reductions, sockets) never call up into it. */
#include "libmesh/context.h"
#include "libmesh/progress.h"
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "libmesh/reduce.h"
#include "libmesh/sock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const mesh_config_entry_t mesh_context_entries[] = {
    {.name = "NODE_ID",
     .dflt = "",
     .type = MESH_CFG_STRING,
     .doc = "Label of this node; ranks with the same label share memory. Empty: the host name."},
    {.name = "NCCL_REPORT",
     .dflt = "no",
     .type = MESH_CFG_BOOL,
     .doc = "libnccl.so.2: at exit, prints to stderr the NCCL entry points the process called "
            "that mesh does not serve and the distinct failures of its calls (counts of each)."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_context_table = {
    .module = "core",
    .entries = mesh_context_entries,
};

static pthread_once_t mesh_context_once = PTHREAD_ONCE_INIT;
static mesh_status_t mesh_context_status;
static char mesh_context_node[256];
static unsigned long long mesh_context_ns;

static void mesh_context_do_init(void)
{
    /* the base services, each with its own table; the first invalid value wins */
    mesh_status_t st = mesh_config_self_register();
    if (st == MESH_OK)
        st = mesh_log_config_register();
    if (st == MESH_OK)
        st = mesh_config_register(&mesh_context_table);
    if (st == MESH_OK)
        st = mesh_progress_config_register();
    if (st == MESH_OK)
        st = mesh_reduce_config_register();
    if (st == MESH_OK)
        st = mesh_sock_config_register();
    if (st == MESH_OK)
        st = mesh_mem_config_register();

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
        if (n > 0)
            boot[n] = '\0';
        close(bfd);
    }
    for (const char *c = boot; ns && *c; c++)
        ns = (ns ^ (unsigned char)*c) * 0x100000001b3ull;
    mesh_context_ns = ns;
    mesh_context_status = st;
}

mesh_status_t mesh_context_init(void)
{
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
    if (pid <= 0 || pidns == 0 || pidns != mesh_context_pidns())
        return 0;
    if (kill(pid, 0) == -1)
        return errno == ESRCH;
    /* a killed process stays a zombie until its parent reaps it, and a zombie still answers
     * kill(pid, 0); its state in /proc tells */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}
