/*
 * mesh-plan --from-topo: the cluster is this machine's node (the core's topology: hwloc, or
 * MESH_TOPO_FILE) repeated --nodes times. GPUs are recognised by their model name; a node
 * without GPUs is planned for CPU ranks, one per core unless --ranks-per-node says otherwise,
 * sharing the node's memory and its network.
 */
#include "config.h"
#include "libmesh/topo.h"
#include "tools/mesh-plan.h"

#include <string.h>
#include <unistd.h>

static const struct {
    const char *match, *also, *preset;
} plan_gpu_kinds[] = {
    {"H100", NULL, "h100"},       {"H800", NULL, "h800"},     {"H200", NULL, "h200"},
    {"A100", "80GB", "a100-80g"}, {"A100", NULL, "a100-40g"},
};

int plan_topo_cluster(plan_opts_t *o)
{
    const mesh_topo_t *t;
    if (mesh_topo_get(&t) != MESH_OK) {
        fprintf(stderr, "mesh-plan: --from-topo: no topology: %s\n", mesh_comm_last_error(NULL));
        return -1;
    }
    int gpus = mesh_topo_ngpus(t), cores = mesh_topo_ncores(t), nics = mesh_topo_nnics(t);
    int rdma = 0, nodes = o->nodes > 0 ? o->nodes : 1;
    for (int i = 0; i < nics; i++)
        rdma += mesh_topo_nic(t, i)->kind == MESH_TOPO_NIC_RDMA;
    mesh_plan_cluster_t *c = &o->cluster;
    char *note = o->topo_note;
    size_t len = sizeof(o->topo_note);
    if (gpus > 0) {
        const char *model = mesh_topo_gpu(t, 0)->model, *preset = NULL;
        for (size_t i = 0; i < sizeof(plan_gpu_kinds) / sizeof(plan_gpu_kinds[0]) && !preset; i++)
            if (strstr(model, plan_gpu_kinds[i].match) &&
                (!plan_gpu_kinds[i].also || strstr(model, plan_gpu_kinds[i].also)))
                preset = plan_gpu_kinds[i].preset;
        if (!preset && o->have_cluster) { /* --cluster gives the figures */
            memset(c, 0, sizeof(*c));
            c->gpus = gpus * nodes;
            c->gpus_per_node = gpus;
            snprintf(note, len,
                     "this node: %d x %s, %d cores, %d NIC%s (%d RDMA); %d node%s; "
                     "figures from --cluster",
                     gpus, model[0] ? model : "GPU", cores, nics, nics == 1 ? "" : "s", rdma, nodes,
                     nodes == 1 ? "" : "s");
            return 0;
        }
        if (!preset) {
            fprintf(stderr,
                    "mesh-plan: --from-topo: this node's GPU '%s' is not one mesh-plan "
                    "knows (H100, H800, H200, A100): describe it with --cluster gpus=,"
                    "gpus-per-node=,gpu-mem=,flops=,intra-bw=,inter-bw=\n",
                    model[0] ? model : "(no model name)");
            return -1;
        }
        mesh_plan_cluster_preset(preset, gpus * nodes, c);
        c->gpus_per_node = gpus;
        snprintf(note, len,
                 "this node: %d x %s (figures of preset %s), %d cores, %d NIC%s (%d "
                 "RDMA); %d node%s; the NICs' speed is not in the topology, the preset's "
                 "inter-node figure is used",
                 gpus, model, preset, cores, nics, nics == 1 ? "" : "s", rdma, nodes,
                 nodes == 1 ? "" : "s");
        if (o->ranks_per_node && o->ranks_per_node != gpus)
            fprintf(stderr,
                    "mesh-plan: --from-topo: one rank per GPU; --ranks-per-node %d "
                    "ignored\n",
                    o->ranks_per_node);
        return 0;
    }
    /* no GPU: CPU ranks share the node's memory and its network */
    int per = o->ranks_per_node > 0 ? o->ranks_per_node : cores > 0 ? cores : 1;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double mem = pages > 0 && psize > 0 ? (double)pages * psize : 4.0 * (1 << 30);
    mesh_plan_cluster_preset("cpu", per * nodes, c);
    c->gpus_per_node = per;
    c->gpu_mem = 0.9 * mem / per;
    c->inter_bw /= per;
    snprintf(note, len,
             "this node has no GPU: planning for %d CPU rank%s per node (%s), %.1f "
             "GiB each (90%% of the node's %.1f GiB), %d NIC%s shared; %d node%s; nominal CPU "
             "figures unless --calibrate gives measured ones",
             per, per == 1 ? "" : "s", o->ranks_per_node > 0 ? "--ranks-per-node" : "one per core",
             c->gpu_mem / (1 << 30), mem / (1 << 30), nics, nics == 1 ? "" : "s", nodes,
             nodes == 1 ? "" : "s");
    return 0;
}
