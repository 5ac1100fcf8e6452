/* The node's topology as text, for mesh-info --topo. */
#include "libmesh/topo.h"

void mesh_topo_print(const mesh_topo_t *t, const char *node, FILE *out)
{
    const char *src = mesh_topo_source(t), *host = mesh_topo_host(t);
    const mesh_topo_cpus_t *cpus = mesh_topo_node_cpus(t);
    fprintf(out, "node     : %s\n", node ? node : "");
    if (src)
        fprintf(out, "source   : %s (saved on host %s)\n", src, *host ? host : "unknown");
    else
        fprintf(out, "source   : discovered on host %s\n", *host ? host : "unknown");
    fprintf(out, "packages : %d\n", mesh_topo_npackages(t));
    fprintf(out, "numa     : %d\n", mesh_topo_nnuma(t));
    fprintf(out, "cores    : %d (%d hardware threads, cpus %s)\n", mesh_topo_ncores(t),
            mesh_topo_npus(t), cpus->list[0] ? cpus->list : "?");
    fprintf(out, "gpus     : %d\n", mesh_topo_ngpus(t));
    for (int i = 0; i < mesh_topo_ngpus(t); i++) {
        const mesh_topo_gpu_t *g = mesh_topo_gpu(t, i);
        const mesh_topo_nic_t *n = mesh_topo_nic(t, g->nic);
        fprintf(out, "  gpu %-2d %s  numa %d  cpus %s  nic %s", i, g->pci, g->numa,
                g->cpus.list[0] ? g->cpus.list : "?", n ? n->name : "none");
        if (n)
            fprintf(out, " (%d hops)", g->nic_hops);
        if (g->model[0])
            fprintf(out, "  %s", g->model);
        fprintf(out, "\n");
    }
    fprintf(out, "nics     : %d\n", mesh_topo_nnics(t));
    for (int i = 0; i < mesh_topo_nnics(t); i++) {
        const mesh_topo_nic_t *n = mesh_topo_nic(t, i);
        fprintf(out, "  nic %-2d %-12s %-4s %s  numa %d", i, n->name,
                n->kind == MESH_TOPO_NIC_RDMA ? "rdma" : "eth", n->pci[0] ? n->pci : "-", n->numa);
        if (n->netdev[0] && (n->kind == MESH_TOPO_NIC_RDMA))
            fprintf(out, "  netdev %s", n->netdev);
        fprintf(out, "\n");
    }
}
