/* --comm-report: the per-axis bytes and exposed time of each step (commrep.h). */
#include "commrep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int commrep_on;

enum { MAX_COMMS = 16, MAX_TLS = 4, MAX_DEPTH = 32 };

static const char *const names[CR_REGIONS] = {"tp", "cp",   "pp",  "ep",
                                              "dp", "norm", "opt", "compute"};

static struct {
    mesh_comm_h comm[MAX_COMMS];
    int axis[MAX_COMMS];
    const char *tl[MAX_COMMS][MAX_TLS];
    int ncomm;
    int stack[MAX_DEPTH], depth;
    double since; /* when the region on top last started counting */
    double ms[CR_REGIONS];
    uint64_t base[CR_AXES];
    double t0;
    uint64_t ep_rows;
    uint64_t dp_at[2]; /* dp bytes when the step began and ended waiting for the reductions */
    double zero_bytes[OPTIM_KINDS]; /* the optimizers' flat buffers, summed over the ranks */
    int zero_n[OPTIM_KINDS];        /* their groups' sizes */
} cr;

static void charge(double now)
{
    int d = cr.depth < MAX_DEPTH ? cr.depth : MAX_DEPTH;
    int top = d ? cr.stack[d - 1] : CR_COMPUTE;
    cr.ms[top] += 1e3 * (now - cr.since);
    cr.since = now;
}

void commrep_push(int region)
{
    if (!commrep_on)
        return;
    charge(mesh_time_now());
    if (cr.depth < MAX_DEPTH)
        cr.stack[cr.depth] = region;
    cr.depth++;
}

mesh_status_t commrep_pop(mesh_status_t s)
{
    if (!commrep_on)
        return s;
    charge(mesh_time_now());
    cr.depth--;
    return s;
}

static void add(mesh_comm_h c, int axis)
{
    if (!c || mesh_comm_size(c) < 2 || cr.ncomm == MAX_COMMS)
        return;
    for (int i = 0; i < cr.ncomm; i++)
        if (cr.comm[i] == c)
            return;
    int k = cr.ncomm++, n = 0;
    cr.comm[k] = c, cr.axis[k] = axis;
    /* the transports carrying its traffic, each once */
    for (int p = 0; p < mesh_comm_size(c) && n < MAX_TLS; p++) {
        const char *tl = mesh_comm_peer_transport(c, p);
        int seen = tl == NULL;
        for (int j = 0; j < n && !seen; j++)
            seen = !strcmp(cr.tl[k][j], tl);
        if (!seen)
            cr.tl[k][n++] = tl;
    }
}

int commrep_setup(const layout_t *lo)
{
    mesh_comm_h tp_pp = NULL;
    if (lo->pp_size > 1 && mesh_grid_comm(lo->grid, "tp-pp", &tp_pp) != MESH_OK)
        return -1;
    add(lo->tp_comm, CR_TP);
    add(lo->cp_comm, CR_CP);
    add(lo->pp_comm, CR_PP);
    add(lo->ep_comm, CR_EP);
    add(lo->dp_comm, CR_DP);
    add(lo->zero_comm, CR_DP);
    add(lo->edp_comm, CR_DP);
    add(tp_pp, CR_NORM);
    add(lo->etp_ep_comm, CR_NORM);
    mesh_comm_h group[OPTIM_KINDS] = {lo->zero_comm, lo->edp_comm};
    for (int k = 0; k < OPTIM_KINDS; k++) {
        mesh_zero_memory_t zm;
        mesh_zero_h z = optim_zero(&lo->opt, k);
        cr.zero_bytes[k] = 0;
        if (z && mesh_zero_memory(z, &zm) == MESH_OK)
            cr.zero_bytes[k] = (double)zm.padded_numel * (lo->bf16 ? 2 : 4);
        cr.zero_n[k] = group[k] ? mesh_comm_size(group[k]) : 1;
    }
    return mesh_allreduce(lo->world, cr.zero_bytes, cr.zero_bytes, OPTIM_KINDS, MESH_FP64, MESH_SUM,
                          NULL, NULL) == MESH_OK
               ? 0
               : -1;
}

void commrep_describe(char *buf, size_t len)
{
    snprintf(buf, len,
             "comm report: ZeRO flat buffers %.0f bytes summed over the ranks in groups of %d "
             "(experts: %.0f bytes in groups of %d)",
             cr.zero_bytes[OPTIM_DENSE], cr.zero_n[OPTIM_DENSE], cr.zero_bytes[OPTIM_EXPERT],
             cr.zero_n[OPTIM_EXPERT]);
}

static void read_bytes(uint64_t *b)
{
    memset(b, 0, CR_AXES * sizeof(*b));
    for (int k = 0; k < cr.ncomm; k++)
        for (int j = 0; j < MAX_TLS && cr.tl[k][j]; j++) {
            uint64_t s = 0;
            if (mesh_comm_tl_bytes(cr.comm[k], cr.tl[k][j], &s, NULL) == MESH_OK)
                b[cr.axis[k]] += s;
        }
}

void commrep_ep_rows(uint64_t rows)
{
    cr.ep_rows += rows;
}

void commrep_dp_wait(int done)
{
    uint64_t b[CR_AXES];
    read_bytes(b);
    cr.dp_at[done ? 1 : 0] = b[CR_DP] - cr.base[CR_DP];
}

void commrep_step_begin(void)
{
    cr.ep_rows = 0;
    cr.dp_at[0] = cr.dp_at[1] = 0;
    memset(cr.ms, 0, sizeof(cr.ms));
    cr.depth = 0;
    read_bytes(cr.base);
    cr.t0 = cr.since = mesh_time_now();
}

void commrep_step_end(commrep_step_t *s)
{
    double now = mesh_time_now();
    charge(now);
    memcpy(s->ms, cr.ms, sizeof(cr.ms));
    read_bytes(s->bytes);
    for (int a = 0; a < CR_AXES; a++)
        s->bytes[a] -= cr.base[a];
    s->step_ms = 1e3 * (now - cr.t0);
    s->ep_rows = cr.ep_rows;
    s->dp_at[0] = cr.dp_at[0], s->dp_at[1] = cr.dp_at[1];
}

const char *commrep_csv_header(void)
{
    return ",tp_bytes,cp_bytes,pp_bytes,ep_bytes,dp_bytes,norm_bytes,tp_ms,cp_ms,pp_ms,ep_ms,dp_ms,"
           "norm_ms,opt_ms,compute_ms,exposed_max_ms,ep_remote_rows,dp_under_compute";
}

int commrep_report(mesh_comm_h world, int64_t step, const commrep_step_t *s, int say, char *csv,
                   size_t csv_len)
{
    int n = mesh_comm_size(world);
    uint64_t bytes[CR_AXES], rows, dp_at[2];
    double ms[CR_REGIONS], exposed = 0;
    for (int a = 0; a < CR_AXES; a++)
        exposed += s->ms[a];
    if (mesh_allreduce(world, s->bytes, bytes, CR_AXES, MESH_UINT64, MESH_SUM, NULL, NULL) ||
        mesh_allreduce(world, s->ms, ms, CR_REGIONS, MESH_FP64, MESH_SUM, NULL, NULL) ||
        mesh_allreduce(world, &exposed, &exposed, 1, MESH_FP64, MESH_MAX, NULL, NULL) ||
        mesh_allreduce(world, &s->ep_rows, &rows, 1, MESH_UINT64, MESH_SUM, NULL, NULL) ||
        mesh_allreduce(world, s->dp_at, dp_at, 2, MESH_UINT64, MESH_SUM, NULL, NULL)) {
        fprintf(stderr, "mesh-train: --comm-report: %s\n", mesh_comm_last_error(NULL));
        return -1;
    }
    /* the share of the gradient reductions' bytes sent before the step waited for them */
    double under = dp_at[1] ? (double)dp_at[0] / (double)dp_at[1] : 0;
    double total = 0, comm = 0;
    for (int r = 0; r < CR_REGIONS; r++) {
        ms[r] /= n;
        total += ms[r];
        comm += r < CR_AXES ? ms[r] : 0;
    }
    if (say) {
        char line[512];
        size_t k = 0;
        for (int a = 0; a < CR_AXES; a++)
            if (bytes[a] || ms[a] > 0)
                k += (size_t)snprintf(line + k, sizeof(line) - k, " %s %llu B %.1f ms |", names[a],
                                      (unsigned long long)bytes[a], ms[a]);
        printf("comm %4lld:%s opt %.1f ms | compute %.1f ms (%.0f%% of the step), exposed "
               "communication %.1f ms mean, %.1f ms max; dp reductions under compute %.0f%%\n",
               (long long)step, line, ms[CR_OPT], ms[CR_COMPUTE],
               total > 0 ? 100 * ms[CR_COMPUTE] / total : 0, comm, exposed, 100 * under);
    }
    if (csv) {
        size_t k = 0;
        for (int a = 0; a < CR_AXES; a++)
            k += (size_t)snprintf(csv + k, csv_len - k, ",%llu", (unsigned long long)bytes[a]);
        for (int r = 0; r < CR_REGIONS; r++)
            k += (size_t)snprintf(csv + k, csv_len - k, ",%.3f", ms[r]);
        snprintf(csv + k, csv_len - k, ",%.3f,%llu,%.4f", exposed, (unsigned long long)rows, under);
    }
    return 0;
}

/* This process's peak resident set in bytes (VmHWM), 0 when unknown. */
static double peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmHWM:", 6))
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb * 1024;
}

enum { MEM_RSS, MEM_PARAMS, MEM_GRADS, MEM_MASTER, MEM_OPTIM, MEM_BUFFERS, MEM_ACTS, MEM_FIELDS };

int commrep_memory(mesh_comm_h world, const optim_t *opt, size_t act_bytes, int say)
{
    mesh_zero_memory_t zm;
    if (optim_memory(opt, &zm))
        return -1;
    double v[MEM_FIELDS + 1] = {peak_rss(),        (double)zm.params,    (double)zm.grads,
                                (double)zm.master, (double)zm.optimizer, (double)zm.buffers,
                                (double)act_bytes},
                          mx[MEM_FIELDS + 1], sum[MEM_FIELDS + 1];
    for (int i = 1; i < MEM_FIELDS; i++) /* the last: this rank's whole account */
        v[MEM_FIELDS] += v[i];
    int w = mesh_comm_size(world);
    double *each = malloc(sizeof(double) * 2 * (size_t)w), mine[2] = {v[MEM_RSS], v[MEM_FIELDS]};
    if (!each)
        return -1;
    if (mesh_allreduce(world, v, mx, MEM_FIELDS + 1, MESH_FP64, MESH_MAX, NULL, NULL) ||
        mesh_allreduce(world, v, sum, MEM_FIELDS + 1, MESH_FP64, MESH_SUM, NULL, NULL) ||
        mesh_allgather(world, mine, each, 2, MESH_FP64, NULL, NULL)) {
        fprintf(stderr, "mesh-train: --comm-report: %s\n", mesh_comm_last_error(NULL));
        free(each);
        return -1;
    }
    if (!say) {
        free(each);
        return 0;
    }
    static const char *const what[MEM_FIELDS + 1] = {"peak RSS",    "parameters", "gradients",
                                                     "master",      "optimizer",  "buffers",
                                                     "activations", "accounted"};
    double n = mesh_comm_size(world), mib = 1048576.0;
    printf("# memory per rank (MiB, largest / mean):");
    for (int i = 0; i <= MEM_FIELDS; i++)
        printf("%s %s %.1f / %.1f", i ? "," : "", what[i], mx[i] / mib, sum[i] / n / mib);
    /* per world rank: the stages and the ranks of one stage differ (the embedding, the head) */
    printf("\n# peak RSS / accounted per rank (MiB):");
    for (int r = 0; r < w; r++)
        printf(" %d: %.1f / %.1f", r, each[2 * r] / mib, each[2 * r + 1] / mib);
    printf("\n");
    free(each);
    return 0;
}
