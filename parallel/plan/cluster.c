/*
 * Clusters: nominal figures of common GPU nodes. Peak flops and memory are the datasheets';
 * bus bandwidths are taken as 80% of NVLink's one-way bandwidth inside a node and 90% of the
 * NIC line rate per GPU between nodes (one NIC per GPU, as in DGX-like nodes). A collective
 * hidden under compute still takes 15% of its time from it: NCCL runs 16 to 32 channels, each on
 * an SM, of the 108 to 132 SMs. Measured figures (mesh_plan_calib_load) replace the nominal
 * ones.
 */
#include "planner.h"

#include <string.h>
#include <strings.h>

#define G PLAN_GIB

static const mesh_plan_cluster_t plan_clusters[] = {
    {.name = "a100-40g",
     .gpus_per_node = 8,
     .gpu_mem = 40 * G,
     .flops = 312e12,
     .mem_bw = 1.555e12,
     .intra_bw = 240e9,
     .inter_bw = 22.5e9,
     .intra_lat = 2e-6,
     .inter_lat = 6e-6,
     .reserve = 2 * G,
     .source = "A100 datasheet: 312 TFLOP/s dense bf16, 1555 GB/s HBM2, NVLink 600 GB/s both "
               "ways; DGX A100: 8 HDR 200 Gb/s NICs"},
    {.name = "a100-80g",
     .gpus_per_node = 8,
     .gpu_mem = 80 * G,
     .flops = 312e12,
     .mem_bw = 2.039e12,
     .intra_bw = 240e9,
     .inter_bw = 22.5e9,
     .intra_lat = 2e-6,
     .inter_lat = 6e-6,
     .reserve = 2 * G,
     .source = "A100 80GB datasheet: 312 TFLOP/s dense bf16, 2039 GB/s HBM2e, NVLink 600 GB/s "
               "both ways; DGX A100: 8 HDR 200 Gb/s NICs"},
    {.name = "h100",
     .gpus_per_node = 8,
     .gpu_mem = 80 * G,
     .flops = 989e12,
     .mem_bw = 3.35e12,
     .intra_bw = 360e9,
     .inter_bw = 45e9,
     .intra_lat = 2e-6,
     .inter_lat = 6e-6,
     .reserve = 2 * G,
     .source = "H100 SXM datasheet: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3, NVLink 900 GB/s "
               "both ways; DGX H100: 8 NDR 400 Gb/s NICs"},
    {.name = "h800",
     .gpus_per_node = 8,
     .gpu_mem = 80 * G,
     .flops = 989e12,
     .mem_bw = 3.35e12,
     .intra_bw = 160e9,
     .inter_bw = 45e9,
     .intra_lat = 2e-6,
     .inter_lat = 6e-6,
     .reserve = 2 * G,
     .source = "H800: H100 compute; DeepSeek-V3 report (arXiv 2412.19437) sec. 3.2.2: NVLink "
               "160 GB/s, InfiniBand 50 GB/s per GPU"},
    {.name = "h200",
     .gpus_per_node = 8,
     .gpu_mem = 140 * G,
     .flops = 989e12,
     .mem_bw = 4.8e12,
     .intra_bw = 360e9,
     .inter_bw = 45e9,
     .intra_lat = 2e-6,
     .inter_lat = 6e-6,
     .reserve = 2 * G,
     .source = "H200 SXM datasheet: 989 TFLOP/s dense bf16, 141 GB HBM3e at 4.8 TB/s, NVLink "
               "900 GB/s both ways; 8 NDR 400 Gb/s NICs per node"},
    {.name = "cpu",
     .gpus_per_node = 1,
     .gpu_mem = 4 * G,
     .flops = 50e9,
     .mem_bw = 10e9,
     .intra_bw = 5e9,
     .inter_bw = 1.1e9,
     .intra_lat = 5e-6,
     .inter_lat = 30e-6,
     .reserve = PLAN_CPU_RESERVE,
     .cpu = 1,
     .precision = MESH_PLAN_PREC_FP32,
     .source = "CPU ranks, one per core: nominal 50 GFLOP/s per core, shared memory 5 GB/s, "
               "10 GbE between nodes; calibrate with mesh-bench for measured figures"},
};

#undef G
#define PLAN_NCLUSTERS ((int)(sizeof(plan_clusters) / sizeof(plan_clusters[0])))

int mesh_plan_cluster_preset_count(void)
{
    return PLAN_NCLUSTERS;
}

const mesh_plan_cluster_t *mesh_plan_cluster_preset_at(int i)
{
    return i >= 0 && i < PLAN_NCLUSTERS ? &plan_clusters[i] : NULL;
}

mesh_status_t mesh_plan_cluster_preset(const char *name, int gpus, mesh_plan_cluster_t *out)
{
    if (!name || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_plan_cluster_preset: "
                              "%s is NULL",
                              name ? "out" : "name");
    const char *alias = strcasecmp(name, "h100-80g") == 0    ? "h100"
                        : strcasecmp(name, "h200-141g") == 0 ? "h200"
                        : strcasecmp(name, "h800-80g") == 0  ? "h800"
                                                             : name;
    for (int i = 0; i < PLAN_NCLUSTERS; i++)
        if (strcasecmp(plan_clusters[i].name, alias) == 0) {
            *out = plan_clusters[i];
            out->gpus = gpus > 0 ? gpus : out->gpus_per_node;
            return MESH_OK;
        }
    return mesh_par_error(MESH_ERR_NOT_FOUND,
                          "cluster '%s' is not a preset (mesh-plan "
                          "--list-clusters names them)",
                          name);
}

mesh_status_t mesh_plan_cluster_check(const mesh_plan_cluster_t *c, mesh_plan_cluster_t *filled)
{
    mesh_plan_cluster_t n;
    if (!c)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_cluster_check: cluster is "
                                                    "NULL");
    MESH_PAR_CHECK(plan_cluster_norm(c, &n));
    if (filled)
        *filled = n;
    return MESH_OK;
}

mesh_status_t plan_cluster_norm(const mesh_plan_cluster_t *in, mesh_plan_cluster_t *c)
{
    *c = *in;
    if (c->gpus < 1 || c->gpus > (1 << 24))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: gpus %d is out of range 1..%d",
                              c->gpus, 1 << 24);
    if (c->gpus_per_node < 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "cluster: gpus-per-node %d must be at "
                              "least 1",
                              c->gpus_per_node);
    if (c->gpus_per_node > c->gpus)
        c->gpus_per_node = c->gpus;
    if (c->gpus % c->gpus_per_node != 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "cluster: gpus %d is not a multiple of "
                              "gpus-per-node %d",
                              c->gpus, c->gpus_per_node);
    if (!(c->gpu_mem > 0) || !(c->flops > 0) || !(c->intra_bw > 0) || !(c->inter_bw > 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: %s must be positive",
                              !(c->gpu_mem > 0)    ? "gpu-mem"
                              : !(c->flops > 0)    ? "flops"
                              : !(c->intra_bw > 0) ? "intra-bw"
                                                   : "inter-bw");
    if (c->efficiency == 0)
        c->efficiency = 0.6;
    if (c->intra_lat == 0)
        c->intra_lat = c->cpu ? 5e-6 : 2e-6;
    if (c->inter_lat == 0)
        c->inter_lat = c->cpu ? 30e-6 : 6e-6;
    if (c->reserve == 0)
        c->reserve = c->cpu ? PLAN_CPU_RESERVE : 2.0 * PLAN_GIB;
    if (c->overlap_cost == 0)
        c->overlap_cost = c->cpu ? 1.0 : 0.15;
    if (c->bucket_bytes == 0)
        c->bucket_bytes =
            c->cpu ? 4.0 * PLAN_MIB : 40e6 * (c->precision == MESH_PLAN_PREC_FP32 ? 4.0 : 2.0);
    if (c->inflight == 0)
        c->inflight = 2;
    if (c->coll_window == 0)
        c->coll_window = c->cpu ? PLAN_CPU_COLL_WINDOW : -1;
    if (!(c->bucket_bytes > 0) || c->inflight < 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "cluster: bucket %g bytes and %d reductions in flight must be "
                              "positive",
                              c->bucket_bytes, c->inflight);
    if (c->overlap_cost < 0)
        c->overlap_cost = 0;
    if (c->overlap_cost > 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: overlap cost %g must be at most 1",
                              c->overlap_cost);
    if (!(c->efficiency > 0 && c->efficiency <= 1))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: efficiency %g must be in (0, 1]",
                              c->efficiency);
    if ((unsigned)c->precision >= MESH_PLAN_PREC_COUNT)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: precision %d is unknown",
                              (int)c->precision);
    if (!(c->intra_lat >= 0) || !(c->inter_lat >= 0) || !(c->reserve >= 0) || !(c->mem_bw >= 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "cluster: latencies, reserve and mem-bw "
                                                    "must not be negative");
    if (c->reserve >= c->gpu_mem)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "cluster: reserve %.2f GiB leaves nothing "
                              "of gpu-mem %.2f GiB",
                              c->reserve / PLAN_GIB, c->gpu_mem / PLAN_GIB);
    return MESH_OK;
}
