/* The process's topology and its own summary (GPU, CPUs, nearest NIC), each resolved once. */
#define MESH_LOG_SUBSYSTEM "topo"
#include "libmesh/bootstrap.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/topo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const mesh_config_entry_t topo_entries[] = {
    {"TOPO_FILE", "", MESH_CFG_STRING,
     "hwloc XML file (as 'lstopo --of xml' or 'mesh-info --topo --dump' write it) describing "
     "this node, read instead of discovering the machine. Empty: discover with hwloc.",
     NULL},
    {"LOCAL_GPU", "-1", MESH_CFG_INT,
     "GPU of this process, by its index on the node in PCI bus order. -1: the entry local "
     "rank % n of CUDA_VISIBLE_DEVICES when set (an index, or a GPU- UUID when hwloc reads "
     "UUIDs through NVML), else local rank % GPUs of the node.",
     NULL, "-1.."},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t topo_table = {"topo", topo_entries};

mesh_status_t mesh_topo_config_register(void)
{
    return mesh_config_register(&topo_table);
}

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static mesh_status_t topo_status;
static mesh_topo_t *topo_self;

static void topo_load_once(void)
{
    topo_status = mesh_context_init();
    if (topo_status == MESH_OK)
        topo_status = mesh_topo_config_register();
    if (topo_status == MESH_OK)
        topo_status = mesh_topo_load(mesh_config_str("TOPO_FILE"), &topo_self);
}

mesh_status_t mesh_topo_get(const mesh_topo_t **topo)
{
    pthread_once(&topo_once, topo_load_once);
    if (topo_status == MESH_OK)
        *topo = topo_self;
    return topo_status;
}

/* Picks the entry of a CUDA_VISIBLE_DEVICES list for this local rank; -2 when the list says
 * nothing usable (UUIDs, out of range), -1 when it hides every GPU. */
static int topo_visible_gpu(const mesh_topo_t *t, int local_rank, const char *visible)
{
    int n = 0;
    for (const char *p = visible; *p; p++)
        n += *p == ',';
    n += 1;
    if (visible[0] == '\0')
        return -1;
    int want = (local_rank < 0 ? 0 : local_rank) % n;
    const char *p = visible;
    for (int i = 0; i < want; i++)
        p = strchr(p, ',') + 1;
    size_t len = strcspn(p, ",");
    if (strncmp(p, "GPU-", 4) == 0) {
        /* a UUID or a unique prefix of one, as CUDA accepts */
        int found = -2;
        for (int g = 0; g < mesh_topo_ngpus(t); g++) {
            const char *u = mesh_topo_gpu(t, g)->uuid;
            if (u[0] && strncmp(u, p, len) == 0)
                found = found == -2 ? g : -3;
        }
        if (found >= 0)
            return found;
        mesh_log_debug("CUDA_VISIBLE_DEVICES entry '%.*s' names no single GPU of this node",
                       (int)len, p);
        return -2;
    }
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || (*end != ',' && *end != '\0')) {
        mesh_log_debug("CUDA_VISIBLE_DEVICES entry %d of '%s' is no index", want, visible);
        return -2;
    }
    if (v < 0)
        return -1; /* CUDA ignores everything from an invalid index on */
    if (v >= mesh_topo_ngpus(t)) {
        mesh_log_warn("CUDA_VISIBLE_DEVICES='%s' names GPU %ld; this node has %d", visible, v,
                      mesh_topo_ngpus(t));
        return -2;
    }
    return (int)v;
}

int mesh_topo_pick_gpu(const mesh_topo_t *t, int local_rank, long long local_gpu,
                       const char *visible)
{
    int n = mesh_topo_ngpus(t);
    if (n == 0)
        return -1;
    if (local_gpu >= 0) {
        if (local_gpu < n)
            return (int)local_gpu;
        mesh_log_warn("MESH_LOCAL_GPU=%lld is not a GPU of this node (it has %d); ignored",
                      local_gpu, n);
    }
    if (visible != NULL) {
        int g = topo_visible_gpu(t, local_rank, visible);
        if (g >= -1)
            return g;
    }
    return (local_rank < 0 ? 0 : local_rank) % n;
}

/* The local rank a launcher gave this process: meshrun, torchrun, Open MPI, Slurm. */
static int topo_launcher_local_rank(void)
{
    if (mesh_bootstrap_config_register() == MESH_OK) {
        long long v = mesh_config_int("LOCAL_RANK");
        if (v >= 0)
            return (int)v;
    }
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                       "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *s = getenv(vars[i]);
        char *end;
        long v = s && *s ? strtol(s, &end, 10) : -1;
        if (s && *s && *end == '\0' && v >= 0)
            return (int)v;
    }
    return -1;
}

static pthread_mutex_t topo_sum_lock = PTHREAD_MUTEX_INITIALIZER;
static int topo_sum_done;
static mesh_topo_summary_t topo_sum;

mesh_status_t mesh_topo_summary(int local_rank, mesh_topo_summary_t *out)
{
    const mesh_topo_t *t = NULL;
    mesh_status_t st = mesh_topo_get(&t);
    if (st != MESH_OK) {
        /* a file the user named must load; a machine hwloc cannot read only loses the hints */
        const char *file = mesh_config_str("TOPO_FILE");
        if (file && *file)
            return st;
        mesh_log_warn("no topology of this node (%s); ranks share no GPU or NIC",
                      mesh_error_last());
        *out = (mesh_topo_summary_t){.gpu = -1, .cpu_first = -1, .cpu_last = -1};
        return MESH_OK;
    }
    pthread_mutex_lock(&topo_sum_lock);
    if (!topo_sum_done) {
        /* fixed at the first communicator, so that every later one agrees on the GPU */
        int lr = topo_launcher_local_rank();
        if (lr < 0)
            lr = local_rank;
        int gpu =
            mesh_topo_pick_gpu(t, lr, mesh_config_int("LOCAL_GPU"), getenv("CUDA_VISIBLE_DEVICES"));
        char bound[MESH_TOPO_CPUSET_MAX];
        mesh_topo_bound_cpus(t, bound, sizeof(bound));
        mesh_topo_fill_summary(t, gpu, bound, &topo_sum);
        topo_sum_done = 1;
        mesh_log_debug("local rank %d: gpu %d, cpus %d-%d (%d), nic '%s'", lr, topo_sum.gpu,
                       topo_sum.cpu_first, topo_sum.cpu_last, topo_sum.cpu_count, topo_sum.nic);
    }
    *out = topo_sum;
    pthread_mutex_unlock(&topo_sum_lock);
    return MESH_OK;
}
