/*
 * mesh-soak: a bounded run of random collectives on random communicators, sizes and datatypes,
 * every result checked against the values each rank must have sent, and the process's memory
 * sampled (RSS, open descriptors, shared-memory mappings) to show that nothing grows once the
 * run is warm. Every rank draws the same choices from the same seed, so no call can mismatch.
 * Run under meshrun; bench/soak.sh drives it over several transports and prints a table.
 */
#include <mesh.h>
#include <mesh/dtype.h>

#include <dirent.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD      64
#define GUARD_BYTE 0xa5
#define MAX_COUNT  (1u << 18)
#define SAMPLE_MAX 4096

enum {
    C_ALLREDUCE,
    C_REDUCE,
    C_BCAST,
    C_RS,
    C_AG,
    C_AGV,
    C_A2A,
    C_GATHER,
    C_SCATTER,
    C_BARRIER,
    C_COUNT
};
static const char *coll_names[C_COUNT] = {"allreduce", "reduce",     "broadcast", "reduce_scatter",
                                          "allgather", "allgatherv", "alltoall",  "gather",
                                          "scatter",   "barrier"};
static const mesh_dtype_t dtypes[] = {MESH_INT8,   MESH_UINT8, MESH_INT32, MESH_UINT32, MESH_INT64,
                                      MESH_UINT64, MESH_FP16,  MESH_BF16,  MESH_FP32,   MESH_FP64};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
static const mesh_op_t ops[] = {MESH_SUM, MESH_MIN, MESH_MAX};

static uint64_t rng_state;
static uint64_t rnd(void)
{
    /* splitmix64: the same sequence on every rank */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------ element values */

/* Small integers, exact in every datatype (sums of up to 16 ranks stay below 127). */
static long value(int rank, size_t i, uint64_t call)
{
    return (long)(((uint64_t)rank * 3 + i * 7 + call) % 5) + 1;
}

static void put(mesh_dtype_t t, void *buf, size_t i, long x)
{
    switch (t) {
    case MESH_INT8:
        ((int8_t *)buf)[i] = (int8_t)x;
        break;
    case MESH_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)x;
        break;
    case MESH_INT32:
        ((int32_t *)buf)[i] = (int32_t)x;
        break;
    case MESH_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)x;
        break;
    case MESH_INT64:
        ((int64_t *)buf)[i] = x;
        break;
    case MESH_UINT64:
        ((uint64_t *)buf)[i] = (uint64_t)x;
        break;
    case MESH_FP16:
        ((uint16_t *)buf)[i] = mesh_float_to_fp16((float)x);
        break;
    case MESH_BF16:
        ((uint16_t *)buf)[i] = mesh_float_to_bf16((float)x);
        break;
    case MESH_FP32:
        ((float *)buf)[i] = (float)x;
        break;
    default:
        ((double *)buf)[i] = (double)x;
        break;
    }
}

static double get(mesh_dtype_t t, const void *buf, size_t i)
{
    switch (t) {
    case MESH_INT8:
        return ((const int8_t *)buf)[i];
    case MESH_UINT8:
        return ((const uint8_t *)buf)[i];
    case MESH_INT32:
        return ((const int32_t *)buf)[i];
    case MESH_UINT32:
        return ((const uint32_t *)buf)[i];
    case MESH_INT64:
        return (double)((const int64_t *)buf)[i];
    case MESH_UINT64:
        return (double)((const uint64_t *)buf)[i];
    case MESH_FP16:
        return mesh_fp16_to_float(((const uint16_t *)buf)[i]);
    case MESH_BF16:
        return mesh_bf16_to_float(((const uint16_t *)buf)[i]);
    case MESH_FP32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

static long reduced(mesh_op_t op, int n, size_t i, uint64_t call)
{
    long acc = value(0, i, call);
    for (int r = 1; r < n; r++) {
        long v = value(r, i, call);
        acc = op == MESH_SUM ? acc + v : op == MESH_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
    }
    return acc;
}

/* ------------------------------------------------------------ memory samples */

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long open_fds(void)
{
    long n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory itself */
}

/* Shared-memory segments this process maps (unlinked ones included). */
static long shm_maps(void)
{
    char line[512], last[512] = "";
    long n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "/dev/shm/");
        if (p != NULL && strcmp(p, last) != 0) {
            n++;
            snprintf(last, sizeof(last), "%s", p);
        }
    }
    fclose(f);
    return n;
}

/* ------------------------------------------------------------ one checked call */

typedef struct {
    int rank, size;
    char *sraw, *rraw; /* buffers with GUARD bytes either side */
    size_t cap;
    uint64_t calls, bytes, wrong, by_coll[C_COUNT];
} soak_t;

static void fail(const char *what, mesh_comm_h c, mesh_status_t st)
{
    fprintf(stderr, "soak: %s failed: %s (%s)\n", what, mesh_status_string(st),
            mesh_comm_last_error(c));
    exit(2);
}

static int guards_ok(const char *raw, size_t len)
{
    for (size_t i = 0; i < GUARD; i++)
        if ((unsigned char)raw[i] != GUARD_BYTE ||
            (unsigned char)raw[GUARD + len + i] != GUARD_BYTE)
            return 0;
    return 1;
}

/* One random collective on comm; returns 0 when every checked byte is right. */
static int soak_call(soak_t *s, mesh_comm_h c, uint64_t call, const char *cname)
{
    int rank = mesh_comm_rank(c), n = mesh_comm_size(c);
    int coll = (int)(rnd() % C_COUNT);
    mesh_dtype_t t = dtypes[rnd() % NDTYPES];
    mesh_op_t op = ops[rnd() % 3];
    size_t es = mesh_dtype_size(t);
    int bits = (int)(rnd() % 19);
    size_t count = 1 + (size_t)(rnd() % (1ull << bits));
    if (count * es * (size_t)n > s->cap / 2)
        count = s->cap / 2 / (es * (size_t)n);
    int root = (int)(rnd() % (uint64_t)n);
    int inplace = rnd() % 4 == 0, async = rnd() % 3 == 0;
    size_t vc[64], vtotal = 0;
    for (int r = 0; r < n; r++)
        vtotal += vc[r] = (count + 3 * (size_t)r) % (count + 1);
    char *sb = s->sraw + GUARD, *rb = s->rraw + GUARD;
    size_t slen = 0, rlen = 0;
    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_BCAST:
        slen = rlen = count;
        break;
    case C_RS:
        slen = count * (size_t)n;
        rlen = count;
        break;
    case C_AG:
    case C_GATHER:
        slen = count;
        rlen = count * (size_t)n;
        break;
    case C_AGV:
        slen = vc[rank];
        rlen = vtotal;
        break;
    case C_A2A:
        slen = rlen = count * (size_t)n;
        break;
    case C_SCATTER:
        slen = count * (size_t)n;
        rlen = count;
        break;
    default:
        break;
    }
    /* only what the call may touch, and the guards around it */
    memset(s->sraw, GUARD_BYTE, slen * es + 2 * GUARD);
    memset(s->rraw, GUARD_BYTE, rlen * es + 2 * GUARD);
    int src = coll == C_SCATTER ? root : rank;
    for (size_t i = 0; i < slen; i++)
        put(t, sb, i, value(src, i, call));
    if (coll == C_A2A) /* block j goes to rank j: element i of it is value(rank, j*count+i) */
        for (size_t i = 0; i < slen; i++)
            put(t, sb, i, value(rank, i, call));
    const void *sarg = sb;
    if (inplace && coll == C_ALLREDUCE) {
        memcpy(rb, sb, slen * es);
        sarg = rb;
    }
    mesh_request_h req = NULL, *preq = async ? &req : NULL;
    mesh_status_t st;
    switch (coll) {
    case C_ALLREDUCE:
        st = mesh_allreduce(c, sarg, rb, count, t, op, NULL, preq);
        break;
    case C_REDUCE:
        st = mesh_reduce(c, sb, rb, count, t, op, root, NULL, preq);
        break;
    case C_BCAST:
        st = mesh_broadcast(c, sb, rb, count, t, root, NULL, preq);
        break;
    case C_RS:
        st = mesh_reduce_scatter(c, sb, rb, count, t, op, NULL, preq);
        break;
    case C_AG:
        st = mesh_allgather(c, sb, rb, count, t, NULL, preq);
        break;
    case C_AGV:
        st = mesh_allgatherv(c, sb, rb, vc, NULL, t, NULL, preq);
        break;
    case C_A2A:
        st = mesh_alltoall(c, sb, rb, count, t, NULL, preq);
        break;
    case C_GATHER:
        st = mesh_gather(c, sb, rb, count, t, root, NULL, preq);
        break;
    case C_SCATTER:
        st = mesh_scatter(c, sb, rb, count, t, root, NULL, preq);
        break;
    default:
        st = mesh_barrier(c, preq);
        break;
    }
    if (st != MESH_OK)
        fail(coll_names[coll], c, st);
    if (async) {
        st = mesh_wait(req);
        mesh_request_free(req);
        if (st != MESH_OK)
            fail(coll_names[coll], c, st);
    }
    s->calls++;
    s->by_coll[coll]++;
    s->bytes += rlen * es;
    size_t bad = (size_t)-1;
    double got = 0;
    long want = 0;
    int check = !(coll == C_REDUCE || coll == C_GATHER) || rank == root;
    for (size_t i = 0; check && i < rlen && bad == (size_t)-1; i++) {
        switch (coll) {
        case C_ALLREDUCE:
        case C_REDUCE:
            want = reduced(op, n, i, call);
            break;
        case C_BCAST:
            want = value(root, i, call);
            break;
        case C_RS:
            want = reduced(op, n, (size_t)rank * count + i, call);
            break;
        case C_AG:
        case C_GATHER:
            want = value((int)(i / count), i % count, call);
            break;
        case C_A2A:
            want = value((int)(i / count), (size_t)rank * count + i % count, call);
            break;
        case C_SCATTER:
            want = value(root, (size_t)rank * count + i, call);
            break;
        case C_AGV: {
            size_t off = i;
            int r = 0;
            while (off >= vc[r])
                off -= vc[r++];
            want = value(r, off, call);
            break;
        }
        }
        got = get(t, rb, i);
        if (got != (double)want)
            bad = i;
    }
    /* a non-root's receive buffer of reduce and gather is not significant */
    int guards = (!check || guards_ok(s->rraw, rlen * es)) && guards_ok(s->sraw, slen * es);
    if (bad != (size_t)-1 || !guards) {
        s->wrong++;
        fprintf(stderr,
                "soak: rank %d WRONG %s on %s (%d ranks) %zu x %s %s root %d%s%s: %s "
                "element %zu is %g, expected %ld\n",
                s->rank, coll_names[coll], cname, n, count, mesh_dtype_name(t), mesh_op_name(op),
                root, inplace ? " in place" : "", async ? " async" : "",
                guards ? "" : "guard bytes changed;", bad, got, want);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ communicators */

typedef struct {
    mesh_comm_h world, dup, split;
    mesh_grid_h grid;
    mesh_comm_h tp, dp;
} comms_t;

static void comms_make(comms_t *k, int grid)
{
    mesh_status_t st = mesh_comm_dup(k->world, &k->dup);
    if (st != MESH_OK)
        fail("mesh_comm_dup", k->world, st);
    int rank = mesh_comm_rank(k->world);
    /* key reverses the order, so the split's ranks differ from the world's */
    st = mesh_comm_split(k->world, rank % 2, -rank, &k->split);
    if (st != MESH_OK)
        fail("mesh_comm_split", k->world, st);
    k->grid = NULL;
    k->tp = k->dp = NULL;
    if (grid) {
        mesh_grid_params_t p = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES};
        p.size[MESH_AXIS_TP] = 2;
        p.size[MESH_AXIS_DP] = mesh_comm_size(k->world) / 2;
        st = mesh_grid_create(k->world, &p, &k->grid);
        if (st != MESH_OK)
            fail("mesh_grid_create", k->world, st);
        if ((st = mesh_grid_comm(k->grid, "tp", &k->tp)) != MESH_OK ||
            (st = mesh_grid_comm(k->grid, "dp", &k->dp)) != MESH_OK)
            fail("mesh_grid_comm", k->world, st);
    }
}

static void comms_free(comms_t *k)
{
    mesh_comm_destroy(k->dup);
    mesh_comm_destroy(k->split);
    if (k->grid)
        mesh_grid_destroy(k->grid);
}

/* ------------------------------------------------------------ main */

typedef struct {
    double t;
    long rss, fds, shm;
} sample_t;

static void usage(void)
{
    printf("usage: mesh-soak [--seconds S] [--seed N] [--warmup FRACTION] [--recreate N]\n"
           "Random collectives on world, dup, split and grid communicators, each result checked;\n"
           "prints memory samples and a final 'SOAK' line. Run under meshrun.\n");
}

int main(int argc, char **argv)
{
    double seconds = 60, warm_frac = 0.25;
    uint64_t seed = 1, recreate = 200;
    static const struct option lo[] = {{"seconds", 1, 0, 's'}, {"seed", 1, 0, 'r'},
                                       {"warmup", 1, 0, 'w'},  {"recreate", 1, 0, 'c'},
                                       {"help", 0, 0, 'h'},    {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "s:r:w:c:h", lo, NULL)) != -1;) {
        switch (o) {
        case 's':
            seconds = atof(optarg);
            break;
        case 'r':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'w':
            warm_frac = atof(optarg);
            break;
        case 'c':
            recreate = strtoull(optarg, NULL, 10);
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 1;
        }
    }
    if (recreate == 0)
        recreate = 1;
    soak_t s = {0};
    comms_t k = {0};
    mesh_status_t st = mesh_comm_init_env(&k.world);
    if (st != MESH_OK)
        fail("mesh_comm_init_env", NULL, st);
    s.rank = mesh_comm_rank(k.world);
    s.size = mesh_comm_size(k.world);
    if (s.size > 64) {
        fprintf(stderr, "soak: at most 64 ranks\n");
        return 1;
    }
    s.cap = (size_t)MAX_COUNT * 8 * (size_t)s.size * 2;
    s.sraw = malloc(s.cap + 2 * GUARD);
    s.rraw = malloc(s.cap + 2 * GUARD);
    if (!s.sraw || !s.rraw)
        return 1;
    /* resident from the start, so that the samples see the library's memory, not ours */
    memset(s.sraw, 0, s.cap + 2 * GUARD);
    memset(s.rraw, 0, s.cap + 2 * GUARD);
    /* a grid with tp = 2 inside nodes, where every node has an even number of ranks */
    int grid = s.size % 2 == 0;
    for (int node = 0; node < mesh_comm_node_count(k.world); node++)
        grid &= mesh_comm_local_size(k.world, node) % 2 == 0;
    comms_make(&k, grid);
    rng_state = seed;
    static sample_t samples[SAMPLE_MAX];
    int nsamples = 0;
    uint64_t recreated = 0;
    double t0 = mesh_time_now(), next_print = t0;
    for (uint64_t call = 0;; call++) {
        if (call % 64 == 0) {
            /* the stop decision (rank 0's clock) and the memory sample, maxima over ranks */
            int64_t in[4] = {s.rank == 0 && mesh_time_now() - t0 >= seconds, rss_kb(), open_fds(),
                             shm_maps()},
                    out[4];
            st = mesh_allreduce(k.world, in, out, 4, MESH_INT64, MESH_MAX, NULL, NULL);
            if (st != MESH_OK)
                fail("sample", k.world, st);
            if (s.rank == 0 && nsamples < SAMPLE_MAX)
                samples[nsamples++] = (sample_t){mesh_time_now() - t0, out[1], out[2], out[3]};
            if (s.rank == 0 && mesh_time_now() >= next_print) {
                printf("t=%6.1fs calls=%llu rss=%ld KiB fds=%ld shm=%ld\n", mesh_time_now() - t0,
                       (unsigned long long)s.calls, (long)out[1], (long)out[2], (long)out[3]);
                fflush(stdout);
                next_print += 30;
            }
            if (out[0])
                break;
        }
        if (call > 0 && call % recreate == 0) {
            comms_free(&k);
            comms_make(&k, grid);
            recreated++;
        }
        int which = (int)(rnd() % (grid ? 5 : 3));
        mesh_comm_h cs[5] = {k.world, k.dup, k.split, k.tp, k.dp};
        static const char *cn[5] = {"world", "dup", "split", "grid tp", "grid dp"};
        soak_call(&s, cs[which], call, cn[which]);
    }
    double elapsed = mesh_time_now() - t0;
    uint64_t totals[3] = {s.calls, s.bytes, s.wrong}, sum[3];
    st = mesh_allreduce(k.world, totals, sum, 3, MESH_UINT64, MESH_SUM, NULL, NULL);
    if (st != MESH_OK)
        fail("totals", k.world, st);
    comms_free(&k);
    if (s.rank == 0) {
        /* warm: the first sample after the warm-up; end: the largest of the last quarter */
        int w = 0;
        while (w < nsamples - 1 && samples[w].t < warm_frac * elapsed)
            w++;
        sample_t end = samples[nsamples - 1];
        for (int i = nsamples - nsamples / 4 - 1; i >= 0 && i < nsamples; i++) {
            if (samples[i].rss > end.rss)
                end.rss = samples[i].rss;
            if (samples[i].fds > end.fds)
                end.fds = samples[i].fds;
            if (samples[i].shm > end.shm)
                end.shm = samples[i].shm;
        }
        sample_t warm = samples[w];
        /* allocator caches settle within a few MiB; descriptors and segments must not move */
        int grew =
            end.rss > warm.rss + 8192 + warm.rss / 10 || end.fds > warm.fds || end.shm > warm.shm;
        printf("per collective (rank 0):");
        for (int c = 0; c < C_COUNT; c++)
            printf(" %s=%llu", coll_names[c], (unsigned long long)s.by_coll[c]);
        /* calls: collectives each rank made; bytes: received by all ranks together */
        printf("\nSOAK ranks=%d seconds=%.0f calls=%llu bytes=%llu wrong=%llu recreated=%llu "
               "rss_warm_kb=%ld rss_end_kb=%ld fds_warm=%ld fds_end=%ld shm_warm=%ld "
               "shm_end=%ld verdict=%s\n",
               s.size, elapsed, (unsigned long long)s.calls, (unsigned long long)sum[1],
               (unsigned long long)sum[2], (unsigned long long)recreated, warm.rss, end.rss,
               warm.fds, end.fds, warm.shm, end.shm,
               sum[2] ? "WRONG"
               : grew ? "GREW"
                      : "ok");
    }
    mesh_comm_destroy(k.world);
    free(s.sraw);
    free(s.rraw);
    return sum[2] ? 3 : 0;
}
