/*
 * meshrun: starts N ranks of a program on this machine with the environment mesh_comm_init_env()
 * reads (MESH_RANK, MESH_SIZE, MESH_ADDR, MESH_SECRET, MESH_NODE_ID) plus MESH_LOCAL_RANK and
 * MESH_LOCAL_SIZE. With --nodes K the ranks are split into K simulated nodes: network namespaces
 * joined through a bridge when run as root, node labels otherwise.
 */
#include "config.h"
#include "libmesh/listen_port.h"
#include "tools/meshrun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char meshrun_usage[] =
    "usage: meshrun -n N [options] program [args...]\n"
    "\n"
    "Starts N ranks of program on this machine, ready for mesh_comm_init_env().\n"
    "\n"
    "  -n, --np N              number of ranks (required)\n"
    "  -N, --nodes K           split the ranks into K simulated nodes (default 1)\n"
    "  -p, --placement P       block: ranks 0..N/K-1 on node0, and so on (default);\n"
    "                          cyclic: rank r on node r%K, like round-robin launchers\n"
    "  -t, --timeout S         kill every rank after S seconds and exit with 124\n"
    "      --tag-output        prefix each output line with [rank]\n"
    "      --netns MODE        auto (default): one network namespace per node when run as\n"
    "                          root with K > 1; on: require them; off: node labels only\n"
    "      --mtu BYTES         MTU of the simulated links (default 1500; 9000 for the jumbo\n"
    "                          frames of many cluster fabrics)\n"
    "  -h, --help              this text\n"
    "\n"
    "Each rank gets MESH_RANK, MESH_SIZE, MESH_ADDR (host:port of rank 0's bootstrap\n"
    "listener), MESH_SECRET (random hex), MESH_NODE_ID (node<k>), MESH_LOCAL_RANK and\n"
    "MESH_LOCAL_SIZE. With namespaces, node k has the address 10.x.y.<k+1>/24 on eth0, all\n"
    "nodes joined by a bridge in a namespace of its own; nothing changes in the host's\n"
    "namespace, and every namespace is deleted when meshrun exits.\n"
    "\n"
    "SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every rank. When a rank exits\n"
    "with a non-zero status or by a signal, the others get SIGTERM, then SIGKILL after\n"
    "3 s, and meshrun exits with that rank's status (128+signal for a signal).\n";

void meshrun_err(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "meshrun: %s\n", buf);
}

double meshrun_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int meshrun_random(void *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = getrandom((char *)buf + done, len - done, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            meshrun_err("getrandom failed: %m");
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static int meshrun_parse_int(const char *opt, const char *text, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        meshrun_err("error: %s expects an integer in [%d, %d], got '%s'", opt, min, max, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* 2: usage error (message printed), 1: --help printed, 0: options parsed. */
static int meshrun_parse(int argc, char **argv, meshrun_opts_t *o)
{
    enum { OPT_TAG = 256, OPT_NETNS, OPT_MTU };
    static const struct option longopts[] = {{"np", required_argument, NULL, 'n'},
                                             {"nodes", required_argument, NULL, 'N'},
                                             {"placement", required_argument, NULL, 'p'},
                                             {"timeout", required_argument, NULL, 't'},
                                             {"tag-output", no_argument, NULL, OPT_TAG},
                                             {"netns", required_argument, NULL, OPT_NETNS},
                                             {"mtu", required_argument, NULL, OPT_MTU},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    char *end;
    int c;

    memset(o, 0, sizeof(*o));
    o->nnodes = 1;
    o->mtu = 1500;
    /* '+': stop at the program name so its own options are left alone */
    while ((c = getopt_long(argc, argv, "+n:N:p:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (meshrun_parse_int("-n", optarg, 1, 65536, &o->nranks))
                return 2;
            break;
        case 'N':
            if (meshrun_parse_int("--nodes", optarg, 1, 65536, &o->nnodes))
                return 2;
            break;
        case 'p':
            if (strcmp(optarg, "block") == 0) {
                o->cyclic = 0;
            } else if (strcmp(optarg, "cyclic") == 0) {
                o->cyclic = 1;
            } else {
                meshrun_err("error: --placement expects block or cyclic, got '%s'", optarg);
                return 2;
            }
            break;
        case 't':
            errno = 0;
            o->timeout_s = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->timeout_s > 0)) {
                meshrun_err("error: --timeout expects a positive number of seconds, got '%s'",
                            optarg);
                return 2;
            }
            break;
        case OPT_TAG:
            o->tag_output = 1;
            break;
        case OPT_NETNS:
            if (strcmp(optarg, "auto") == 0) {
                o->netns = MESHRUN_NETNS_AUTO;
            } else if (strcmp(optarg, "on") == 0) {
                o->netns = MESHRUN_NETNS_ON;
            } else if (strcmp(optarg, "off") == 0) {
                o->netns = MESHRUN_NETNS_OFF;
            } else {
                meshrun_err("error: --netns expects auto, on or off, got '%s'", optarg);
                return 2;
            }
            break;
        case OPT_MTU:
            if (meshrun_parse_int("--mtu", optarg, 576, 65535, &o->mtu))
                return 2;
            break;
        case 'h':
            fputs(meshrun_usage, stdout);
            return 1;
        default:
            fprintf(stderr, "meshrun: try 'meshrun --help'\n");
            return 2;
        }
    }
    if (o->nranks == 0) {
        meshrun_err("error: -n N (number of ranks) is required; try 'meshrun --help'");
        return 2;
    }
    if (optind >= argc) {
        meshrun_err("error: no program given; try 'meshrun --help'");
        return 2;
    }
    if (o->nnodes > o->nranks) {
        meshrun_err("error: --nodes %d is more than the %d ranks (-n)", o->nnodes, o->nranks);
        return 2;
    }
    o->argv = argv + optind;
    return 0;
}

/* Node of each rank, then rank within the node and ranks per node. */
static void meshrun_place(const meshrun_opts_t *o, meshrun_rank_t *ranks)
{
    int n = o->nranks, k = o->nnodes;
    int base = n / k, extra = n % k; /* the first `extra` nodes get one rank more */
    int *count = calloc((size_t)k, sizeof(int));

    for (int r = 0; r < n; r++) {
        int node;
        if (o->cyclic)
            node = r % k;
        else if (r < extra * (base + 1))
            node = r / (base + 1);
        else
            node = extra + (r - extra * (base + 1)) / base;
        ranks[r].rank = r;
        ranks[r].node = node;
        ranks[r].local_rank = count[node]++;
        ranks[r].out[0] = ranks[r].out[1] = -1;
    }
    for (int r = 0; r < n; r++)
        ranks[r].local_size = count[ranks[r].node];
    free(count);
}

static int meshrun_port_rand(void *arg, unsigned *out)
{
    (void)arg;
    return meshrun_random(out, sizeof(*out));
}

/* The last port drawn for rank 0's listener in a fresh namespace, where any port from
 * MESH_LISTEN_PORT_MIN up to it is free. */
#define MESHRUN_NS_PORT_MAX 60000u

/* A port for rank 0's listener: in a fresh namespace, any of MESH_LISTEN_PORT_MIN ..
 * MESHRUN_NS_PORT_MAX; on the host's loopback, one below the kernel's ephemeral range that
 * binds now (libmesh/listen_port.h). */
static int meshrun_pick_port(int check_loopback)
{
    unsigned r;
    const unsigned span = MESHRUN_NS_PORT_MAX - MESH_LISTEN_PORT_MIN + 1;
    if (!check_loopback)
        return meshrun_random(&r, sizeof(r)) ? -1 : (int)(MESH_LISTEN_PORT_MIN + r % span);
    int port = mesh_listen_port_pick(1, meshrun_port_rand, NULL);
    if (port < 0)
        meshrun_err("error: no free port found in %u-%u on 127.0.0.1", MESH_LISTEN_PORT_MIN,
                    mesh_listen_port_top() - 1);
    return port;
}

int main(int argc, char **argv)
{
    meshrun_opts_t o;
    meshrun_netns_t ns = {0};
    char addr[64], secret[65];
    unsigned char raw[32];
    sigset_t set;
    int rc;

    rc = meshrun_parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;

    /* Signals wait in the queue from here on (the supervisor reads them from a signalfd), so
     * no exit path can skip the namespace cleanup. */
    meshrun_signals(&set);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* a shell starting meshrun in the background ignores SIGINT/SIGQUIT: take them anyway
     * (ignored signals never reach a signalfd); SIGHUP stays as nohup left it */
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);

    meshrun_rank_t *ranks = calloc((size_t)o.nranks, sizeof(*ranks));
    if (!ranks) {
        meshrun_err("error: out of memory for %d ranks", o.nranks);
        return 1;
    }
    meshrun_place(&o, ranks);

    int want_ns = o.netns == MESHRUN_NETNS_ON ||
                  (o.netns == MESHRUN_NETNS_AUTO && o.nnodes > 1 && geteuid() == 0);
    if (want_ns && o.netns == MESHRUN_NETNS_ON && geteuid() != 0) {
        meshrun_err("error: --netns on needs root (network namespaces); use --netns off");
        free(ranks);
        return 1;
    }
    if (want_ns && o.nnodes > MESHRUN_MAX_NETNS_NODES) {
        meshrun_err("error: at most %d nodes with network namespaces, got --nodes %d",
                    MESHRUN_MAX_NETNS_NODES, o.nnodes);
        free(ranks);
        return 1;
    }
    if (want_ns) {
        meshrun_netns_reap_stale();
        ns.mtu = o.mtu;
        if (meshrun_netns_setup(&ns, o.nnodes)) {
            meshrun_netns_cleanup(&ns);
            if (o.netns == MESHRUN_NETNS_ON) {
                free(ranks);
                return 1;
            }
            meshrun_err("warning: no network namespaces; simulated nodes share 127.0.0.1 "
                        "(--netns off silences this)");
        }
    }

    int port = meshrun_pick_port(!ns.active);
    if (port < 0 || meshrun_random(raw, sizeof(raw))) {
        meshrun_netns_cleanup(&ns);
        free(ranks);
        return 1;
    }
    if (ns.active) {
        char ip[32];
        meshrun_netns_addr(&ns, ranks[0].node, ip, sizeof(ip));
        snprintf(addr, sizeof(addr), "%s:%d", ip, port);
    } else {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(secret + 2 * i, 3, "%02x", raw[i]);

    rc = meshrun_supervise(&o, ranks, &ns, addr, secret);
    meshrun_netns_cleanup(&ns);
    free(ranks);
    return rc;
}
