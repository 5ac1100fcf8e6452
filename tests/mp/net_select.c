/*
 * Network transport selection, run under meshrun with simulated nodes:
 *   net_select --expect NAME   every peer on another node goes over NAME, a barrier works
 *   net_select --fail WORD     communicator creation fails with MESH_ERR_INVALID_ARG and a
 *                              message containing WORD
 */
#include "mesh.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *expect = NULL, *fail = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--expect") == 0)
            expect = argv[i + 1];
        if (strcmp(argv[i], "--fail") == 0)
            fail = argv[i + 1];
    }
    if (!expect == !fail) {
        fprintf(stderr, "usage: net_select --expect NAME | --fail WORD\n");
        return 2;
    }
    mesh_comm_h comm = NULL;
    mesh_status_t st = mesh_comm_init_env(&comm);
    if (fail) {
        const char *msg = mesh_comm_last_error(NULL);
        if (st != MESH_ERR_INVALID_ARG || strstr(msg, fail) == NULL) {
            fprintf(stderr, "net_select: init gave %s (%s), want invalid argument naming '%s'\n",
                    mesh_status_string(st), msg, fail);
            return 1;
        }
        printf("net_select: init refused: %s\n", msg);
        return 0;
    }
    if (st != MESH_OK) {
        fprintf(stderr, "net_select: init: %s: %s\n", mesh_status_string(st),
                mesh_comm_last_error(NULL));
        return 1;
    }
    int rank = mesh_comm_rank(comm), size = mesh_comm_size(comm), remote = 0, bad = 0;
    for (int p = 0; p < size; p++) {
        if (mesh_comm_node(comm, p) == mesh_comm_node(comm, rank))
            continue;
        remote++;
        const char *tl = mesh_comm_peer_transport(comm, p);
        if (tl == NULL || strcmp(tl, expect) != 0) {
            fprintf(stderr, "net_select: rank %d reaches rank %d over %s, want %s\n", rank, p,
                    tl ? tl : "(none)", expect);
            bad = 1;
        }
    }
    if (remote == 0) {
        fprintf(stderr, "net_select: rank %d has no peer on another node\n", rank);
        bad = 1;
    }
    if (mesh_barrier(comm, NULL) != MESH_OK) {
        fprintf(stderr, "net_select: barrier: %s\n", mesh_comm_last_error(comm));
        bad = 1;
    }
    mesh_comm_destroy(comm);
    if (!bad)
        printf("net_select: rank %d: %d remote peers over %s\n", rank, remote, expect);
    return bad;
}
