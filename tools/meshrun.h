/* meshrun: local launcher with simulated nodes. Shared between its three files. */
#ifndef MESHRUN_H
#define MESHRUN_H

#include <signal.h>
#include <sys/types.h>

#define MESHRUN_MAX_NETNS_NODES 250 /* one /24 per run: hosts .1 .. .250 */
#define MESHRUN_GRACE_S         3.0 /* SIGTERM, then SIGKILL after this long */

typedef enum { MESHRUN_NETNS_AUTO = 0, MESHRUN_NETNS_ON, MESHRUN_NETNS_OFF } meshrun_netns_mode_t;

typedef struct {
    int nranks;
    int nnodes;
    int cyclic;       /* placement: rank r on node r % nnodes */
    double timeout_s; /* 0: none */
    int tag_output;
    meshrun_netns_mode_t netns;
    int mtu;     /* of the simulated links */
    char **argv; /* program and its arguments, NULL-terminated */
} meshrun_opts_t;

/* The network namespaces of one run: one per node plus one holding the bridge. */
typedef struct {
    int active; /* ranks run inside the namespaces */
    int nnodes;
    char prefix[32];      /* "mesh-<pid>" */
    unsigned char net[2]; /* 10.<net[0]>.<net[1]>.0/24 */
    int mtu;              /* of every veth (the bridge follows) */
    int ncreated;         /* namespaces created so far, in creation order (sw first) */
    int *fd;              /* [nnodes] open namespace files, -1 if none */
} meshrun_netns_t;

typedef struct {
    int rank;
    int node;
    int local_rank;
    int local_size;
    pid_t pid;  /* 0 once reaped */
    int status; /* wait status */
    int out[2]; /* tag-output pipes (read ends), -1 when closed */
} meshrun_rank_t;

/* meshrun_netns.c */
/* Removes namespaces of earlier runs whose meshrun process is gone (killed by SIGKILL). */
void meshrun_netns_reap_stale(void);
/* Creates the namespaces, bridge and veths; 0 on success, -1 after printing why. */
int meshrun_netns_setup(meshrun_netns_t *ns, int nnodes);
/* Address of node k inside the run's network ("10.x.y.k+1"). */
void meshrun_netns_addr(const meshrun_netns_t *ns, int node, char *buf, size_t len);
/* Called in the child after fork: moves it into the node's namespace. */
int meshrun_netns_enter(const meshrun_netns_t *ns, int node);
/* Deletes every namespace created; safe to call more than once. */
void meshrun_netns_cleanup(meshrun_netns_t *ns);

/* meshrun_proc.c */
/* Starts every rank and supervises them until all are gone; returns meshrun's exit status. */
int meshrun_supervise(const meshrun_opts_t *o, meshrun_rank_t *ranks, const meshrun_netns_t *ns,
                      const char *addr, const char *secret);
/* The signals the supervisor reads from its signalfd, blocked from startup on. */
void meshrun_signals(sigset_t *set);

/* Helpers shared by the files. */
void meshrun_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double meshrun_now(void);
int meshrun_random(void *buf, size_t len);

#endif
