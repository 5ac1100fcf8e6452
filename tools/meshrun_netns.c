/*
 * Simulated nodes as network namespaces. Layout of one run (prefix mesh-<pid>):
 *
 *   mesh-<pid>-n0: lo, eth0 10.x.y.1/24  --veth--  v0 \
 *   mesh-<pid>-n1: lo, eth0 10.x.y.2/24  --veth--  v1  > br0 in mesh-<pid>-sw
 *   ...                                                /
 *
 * Every link is created directly inside the run's own namespaces (ip -n), so the host's
 * namespace is never touched and the 10.x.y.0/24 addresses exist only here; x and y come from
 * meshrun's pid so that concurrent runs never share a subnet.
 */
#include "config.h"
#include "tools/meshrun.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where `ip netns add` keeps its namespaces: iproute2 builds name /var/run/netns or /run/netns,
 * the same folder where /var/run links to /run, two where a system keeps them apart. */
static const char *const meshrun_netns_dirs[] = {"/run/netns", "/var/run/netns"};
#define MESHRUN_NETNS_NDIRS ((int)(sizeof(meshrun_netns_dirs) / sizeof(meshrun_netns_dirs[0])))

/* The path of namespace name in the folder that holds it (the first one when none does). */
static void meshrun_netns_path(const char *name, char *path, size_t len)
{
    for (int i = 0; i < MESHRUN_NETNS_NDIRS; i++) {
        snprintf(path, len, "%s/%s", meshrun_netns_dirs[i], name);
        if (access(path, F_OK) == 0)
            return;
    }
    snprintf(path, len, "%s/%s", meshrun_netns_dirs[0], name);
}

static const char *meshrun_ip_path(void)
{
    static const char *const paths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return "ip";
}

/* Runs `ip args...` and waits for it; 0 on success, -1 after printing the command. */
static int meshrun_ip(const char *a0, ...)
{
    const char *argv[24];
    int argc = 0;
    va_list ap;

    argv[argc++] = "ip";
    argv[argc++] = a0;
    va_start(ap, a0);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && argc < 23)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    pid_t pid = fork();
    if (pid < 0) {
        meshrun_err("error: fork failed: %m");
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        execv(meshrun_ip_path(), (char *const *)argv);
        execvp("ip", (char *const *)argv);
        fprintf(stderr, "meshrun: cannot execute ip (iproute2): %m\n");
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;

    char cmd[512] = "";
    for (int i = 0; i < argc; i++) {
        strncat(cmd, argv[i], sizeof(cmd) - strlen(cmd) - 2);
        strncat(cmd, " ", sizeof(cmd) - strlen(cmd) - 1);
    }
    meshrun_err("error: '%s' failed (%s %d)", cmd, WIFEXITED(status) ? "status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
}

static void meshrun_netns_name(const meshrun_netns_t *ns, int node, char *buf, size_t len)
{
    if (node < 0)
        snprintf(buf, len, "%s-sw", ns->prefix);
    else
        snprintf(buf, len, "%s-n%d", ns->prefix, node);
}

/* What `ip netns del` does: detach the bind mount that keeps the namespace, then the file.
 * The namespace itself goes away with its last process. */
static void meshrun_netns_delete(const char *name)
{
    char path[128];
    meshrun_netns_path(name, path, sizeof(path));
    if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        meshrun_err("warning: cannot unmount %s: %m", path);
    if (unlink(path) < 0 && errno != ENOENT)
        meshrun_err("warning: cannot remove %s: %m", path);
}

void meshrun_netns_reap_stale(void)
{
    for (int i = 0; i < MESHRUN_NETNS_NDIRS; i++) {
        DIR *d = opendir(meshrun_netns_dirs[i]);
        struct dirent *e;
        if (!d)
            continue;
        while ((e = readdir(d)) != NULL) {
            int pid, used = 0;
            if (sscanf(e->d_name, "mesh-%d-%*[ns]%n", &pid, &used) != 1 || used == 0)
                continue;
            if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
                continue;
            meshrun_netns_delete(e->d_name);
        }
        closedir(d);
    }
}

void meshrun_netns_addr(const meshrun_netns_t *ns, int node, char *buf, size_t len)
{
    snprintf(buf, len, "10.%u.%u.%d", ns->net[0], ns->net[1], node + 1);
}

int meshrun_netns_setup(meshrun_netns_t *ns, int nnodes)
{
    char sw[64], name[64], peer[16], ip[48];
    pid_t self = getpid();

    ns->nnodes = nnodes;
    ns->ncreated = 0;
    snprintf(ns->prefix, sizeof(ns->prefix), "mesh-%d", (int)self);
    /* 10.x.y.0/24 from the pid; x avoids 0 so the subnet never looks like a default one */
    ns->net[0] = (unsigned char)(1 + ((unsigned)self >> 8) % 254);
    ns->net[1] = (unsigned char)((unsigned)self & 0xff);
    ns->fd = malloc((size_t)nnodes * sizeof(int));
    if (!ns->fd) {
        meshrun_err("error: out of memory");
        return -1;
    }
    for (int k = 0; k < nnodes; k++)
        ns->fd[k] = -1;

    meshrun_netns_name(ns, -1, sw, sizeof(sw));
    if (meshrun_ip("netns", "add", sw, NULL))
        return -1;
    ns->ncreated = 1;
    for (int k = 0; k < nnodes; k++) {
        meshrun_netns_name(ns, k, name, sizeof(name));
        if (meshrun_ip("netns", "add", name, NULL))
            return -1;
        ns->ncreated++;
    }
    if (meshrun_ip("-n", sw, "link", "add", "br0", "type", "bridge", NULL) ||
        meshrun_ip("-n", sw, "link", "set", "br0", "up", NULL))
        return -1;
    for (int k = 0; k < nnodes; k++) {
        meshrun_netns_name(ns, k, name, sizeof(name));
        snprintf(peer, sizeof(peer), "v%d", k);
        meshrun_netns_addr(ns, k, ip, sizeof(ip));
        strcat(ip, "/24");
        char mtu[16];
        snprintf(mtu, sizeof(mtu), "%d", ns->mtu > 0 ? ns->mtu : 1500);
        if (meshrun_ip("-n", name, "link", "add", "eth0", "mtu", mtu, "type", "veth", "peer",
                       "name", peer, "mtu", mtu, "netns", sw, NULL) ||
            meshrun_ip("-n", sw, "link", "set", peer, "master", "br0", "up", NULL) ||
            meshrun_ip("-n", name, "addr", "add", ip, "dev", "eth0", NULL) ||
            meshrun_ip("-n", name, "link", "set", "eth0", "up", NULL) ||
            meshrun_ip("-n", name, "link", "set", "lo", "up", NULL))
            return -1;

        char path[128];
        meshrun_netns_path(name, path, sizeof(path));
        ns->fd[k] = open(path, O_RDONLY | O_CLOEXEC);
        if (ns->fd[k] < 0) {
            meshrun_err("error: cannot open %s: %m", path);
            return -1;
        }
    }
    ns->active = 1;
    return 0;
}

int meshrun_netns_enter(const meshrun_netns_t *ns, int node)
{
    if (!ns->active)
        return 0;
    if (setns(ns->fd[node], CLONE_NEWNET) < 0) {
        fprintf(stderr, "meshrun: cannot enter the namespace of node%d: %m\n", node);
        return -1;
    }
    return 0;
}

void meshrun_netns_cleanup(meshrun_netns_t *ns)
{
    char name[64];
    if (ns->fd) {
        for (int k = 0; k < ns->nnodes; k++)
            if (ns->fd[k] >= 0)
                close(ns->fd[k]);
        free(ns->fd);
        ns->fd = NULL;
    }
    /* node namespaces first (their veths die with them), the bridge's last */
    for (int i = ns->ncreated - 1; i >= 0; i--) {
        meshrun_netns_name(ns, i - 1, name, sizeof(name));
        meshrun_netns_delete(name);
    }
    ns->ncreated = 0;
    ns->active = 0;
}
