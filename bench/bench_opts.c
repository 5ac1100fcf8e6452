/* Options, names and sizes of the benchmark (nccl-tests conventions). */
#include "config.h"
#include "bench/bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char *const bench_op_names[BENCH_OP_COUNT] = {
    "allreduce", "reduce", "broadcast", "reduce_scatter", "allgather",
    "alltoall",  "gather", "scatter",   "sendrecv",       "dispatch_combine"};
static const char *const bench_dtype_names[BENCH_DTYPE_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "fp16", "bf16",  "fp32",  "fp64",   "e4m3",  "e5m2"};
static const size_t bench_dtype_sizes[BENCH_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
static const char *const bench_redop_names[BENCH_REDOP_COUNT] = {"sum", "prod", "min", "max",
                                                                 "avg"};

static const char *const bench_axis_names[BENCH_AXIS_COUNT] = {"tp", "cp", "ep", "dp", "pp"};

const char *bench_op_name(bench_op_t op)
{
    return bench_op_names[op];
}
const char *bench_axis_name(bench_axis_id_t a)
{
    return bench_axis_names[a];
}
const char *bench_dtype_name(bench_dtype_t d)
{
    return bench_dtype_names[d];
}
const char *bench_redop_name(bench_redop_t r)
{
    return bench_redop_names[r];
}
size_t bench_dtype_size(bench_dtype_t d)
{
    return bench_dtype_sizes[d];
}

int bench_op_is_reduction(bench_op_t op)
{
    return op == BENCH_ALLREDUCE || op == BENCH_REDUCE || op == BENCH_REDUCE_SCATTER;
}

static const char bench_usage[] =
    "usage: %s [options]        (start the ranks with %s)\n"
    "\n"
    "Measures collectives like nccl-tests: every size is validated first, then timed.\n"
    "\n"
    "  -o, --op LIST        allreduce reduce broadcast reduce_scatter allgather alltoall\n"
    "                       gather scatter sendrecv dispatch_combine, comma-separated, or all\n"
    "                       (default allreduce)\n"
    "  -b, --minbytes B     smallest size S in bytes, suffixes k m g (default 8)\n"
    "  -e, --maxbytes B     largest size S (default 8m)\n"
    "  -f, --stepfactor F   multiply the size by F between rows (default 2)\n"
    "  -n, --iters N        timed iterations per size (default 20)\n"
    "  -w, --warmup N       untimed iterations before them (default 5)\n"
    "      --min-time S     time each size for at least S seconds: after the N iterations,\n"
    "                       more until the slowest rank reached S (the same count on every\n"
    "                       rank; S of 0.05 or more lets a busy machine's time slices average\n"
    "                       out)\n"
    "  -d, --datatype LIST  int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64 e4m3\n"
    "                       e5m2, comma-separated, or all (default fp32)\n"
    "  -r, --redop LIST     sum prod min max avg, comma-separated, or all (default sum)\n"
    "  -c, --check 0|1      validate every size before timing it (default 1)\n"
    "  -a, --algo NAME      force an algorithm for the selected ops (MESH_TUNE=op:NAME);\n"
    "                       text with ':' is used as MESH_TUNE verbatim\n"
    "  -R, --root R         root of reduce, broadcast, gather and scatter (default 0)\n"
    "      --csv FILE       also write the rows to FILE (rank 0)\n"
    "      --json FILE      also write the rows to FILE as JSON (rank 0)\n"
    "      --plot DIR       write DIR/OP.png per op with gnuplot: busbw against size, one\n"
    "                       curve per axis\n"
    "      --memcpy         measure this process's memcpy bandwidth over the sizes instead\n"
    "      --bytes          show the bytes each transport carried per out-of-place call,\n"
    "                       summed over the ranks (e.g. tcp between nodes, shm within)\n"
    "      --skew S         dispatch_combine: each token's 2 experts of 2 x ranks drawn with\n"
    "                       probability proportional to 1 / (e + 1)^S (default 0, uniform)\n"
    "      --ep-path P      dispatch_combine: flat, hier or auto (default; mesh-bench only)\n"
    "      --idle S         instead: rank 0 sleeps S seconds before a barrier that the others\n"
    "                       wait in; prints the CPU time each waiting rank used meanwhile\n"
    "  -m, --memory TYPE    buffers in host (default) or device memory: device takes the\n"
    "                       active device table, cuda or emu name one (emu sets\n"
    "                       MESH_DEVICE_EMU=1); calls run on a stream, timed until it\n"
    "                       completed, and each size's device-to-device copy rate is shown\n"
    "                       as the bound (mesh-bench only)\n"
    "      --device         -m device\n"
    "  -h, --help           this text\n"
    "\n"
    "Per-axis bench of a 5D mesh (mesh-bench only):\n"
    "      --mesh SPEC      axis sizes, e.g. tp=2,dp=2,pp=2 (axes tp cp ep dp pp; unset ones\n"
    "                       are 1; the product is the number of ranks)\n"
    "      --order ORDER    axes innermost first (default tp-cp-ep-dp-pp)\n"
    "      --reorder        renumber ranks node by node so that tp fits in a node\n"
    "      --axes LIST      axis communicators to measure, comma-separated: tp cp ep dp pp,\n"
    "                       combined ones such as dp-cp, or all (default: every axis of\n"
    "                       size > 1). Every group of an axis runs at once; along pp the op\n"
    "                       is sendrecv, each stage to the next in a ring\n"
    "\n"
    "S follows nccl-tests: count x type size for allreduce, reduce, broadcast and sendrecv;\n"
    "the whole buffer (all ranks' blocks) for reduce_scatter, allgather, alltoall, gather\n"
    "and scatter. algbw = S / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n\n"
    "(reduce_scatter, allgather, alltoall, gather, scatter), 4(n-1)/n (dispatch_combine,\n"
    "whose S is this rank's token rows: each goes to 2 experts and comes back; skew changes\n"
    "what leaves a rank), 1 (the others). time is each\n"
    "rank's average over the iterations, the maximum across ranks (of every group of the axis\n"
    "with --mesh). The exit status is 1 when any element was wrong.\n";

static int bench_parse_size(const char *opt, const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned long long mul = 1;
    if (errno || end == text || text[0] == '-')
        goto bad;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end || (v && mul > ~0ull / v))
        goto bad;
    *out = (size_t)(v * mul);
    return 0;
bad:
    fprintf(stderr, "error: %s expects a size in bytes (suffix k, m or g), got '%s'\n", opt, text);
    return -1;
}

static int bench_parse_int(const char *opt, const char *text, int min, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > 1000000000L) {
        fprintf(stderr, "error: %s expects an integer >= %d, got '%s'\n", opt, min, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A comma-separated list of names from table, or "all", as a bit set. */
static int bench_parse_list(const char *opt, const char *text, const char *const *names, int n,
                            unsigned *out)
{
    char buf[512];
    unsigned set = 0;
    if (strcmp(text, "all") == 0) {
        *out = (1u << n) - 1;
        return 0;
    }
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int i;
        for (i = 0; i < n && strcmp(names[i], tok) != 0; i++)
            ;
        if (i == n) {
            fprintf(stderr, "error: %s: unknown name '%s'; one of:", opt, tok);
            for (i = 0; i < n; i++)
                fprintf(stderr, " %s", names[i]);
            fprintf(stderr, " all\n");
            return -1;
        }
        set |= 1u << i;
    }
    if (!set) {
        fprintf(stderr, "error: %s: empty list\n", opt);
        return -1;
    }
    *out = set;
    return 0;
}

/* "tp=2,dp=4" into sizes by axis; each axis at most once, sizes >= 1. */
static int bench_parse_mesh(const char *text, int *size)
{
    char buf[256];
    if (strlen(text) >= sizeof(buf))
        goto bad;
    snprintf(buf, sizeof(buf), "%s", text);
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        size[a] = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int a, v;
        if (!eq)
            goto bad;
        *eq = 0;
        for (a = 0; a < BENCH_AXIS_COUNT && strcmp(bench_axis_names[a], tok) != 0; a++)
            ;
        if (a == BENCH_AXIS_COUNT) {
            fprintf(stderr, "error: --mesh: unknown axis '%s'; one of: tp cp ep dp pp\n", tok);
            return -1;
        }
        if (size[a]) {
            fprintf(stderr, "error: --mesh: axis %s given twice\n", tok);
            return -1;
        }
        if (bench_parse_int("--mesh", eq + 1, 1, &v))
            return -1;
        size[a] = v;
    }
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        if (size[a])
            return 0;
bad:
    fprintf(stderr, "error: --mesh expects AXIS=SIZE pairs such as tp=2,dp=2,pp=2, got '%s'\n",
            text);
    return -1;
}

unsigned bench_axis_ops(const bench_opts_t *o, const char *axis)
{
    return strcmp(axis, "pp") == 0 ? 1u << BENCH_SENDRECV : o->ops;
}

int bench_parse(int argc, char **argv, const char *prog, bench_opts_t *o)
{
    enum {
        OPT_CSV = 256,
        OPT_MEMCPY,
        OPT_MESH,
        OPT_ORDER,
        OPT_REORDER,
        OPT_AXES,
        OPT_JSON,
        OPT_PLOT,
        OPT_BYTES,
        OPT_SKEW,
        OPT_EP_PATH,
        OPT_IDLE,
        OPT_MIN_TIME,
        OPT_DEVICE
    };
    static const struct option longopts[] = {{"op", required_argument, NULL, 'o'},
                                             {"minbytes", required_argument, NULL, 'b'},
                                             {"maxbytes", required_argument, NULL, 'e'},
                                             {"stepfactor", required_argument, NULL, 'f'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"datatype", required_argument, NULL, 'd'},
                                             {"redop", required_argument, NULL, 'r'},
                                             {"check", required_argument, NULL, 'c'},
                                             {"algo", required_argument, NULL, 'a'},
                                             {"root", required_argument, NULL, 'R'},
                                             {"csv", required_argument, NULL, OPT_CSV},
                                             {"memcpy", no_argument, NULL, OPT_MEMCPY},
                                             {"help", no_argument, NULL, 'h'},
                                             {"mesh", required_argument, NULL, OPT_MESH},
                                             {"order", required_argument, NULL, OPT_ORDER},
                                             {"reorder", no_argument, NULL, OPT_REORDER},
                                             {"axes", required_argument, NULL, OPT_AXES},
                                             {"json", required_argument, NULL, OPT_JSON},
                                             {"plot", required_argument, NULL, OPT_PLOT},
                                             {"bytes", no_argument, NULL, OPT_BYTES},
                                             {"skew", required_argument, NULL, OPT_SKEW},
                                             {"ep-path", required_argument, NULL, OPT_EP_PATH},
                                             {"idle", required_argument, NULL, OPT_IDLE},
                                             {"min-time", required_argument, NULL, OPT_MIN_TIME},
                                             {"memory", required_argument, NULL, 'm'},
                                             {"device", no_argument, NULL, OPT_DEVICE},
                                             {NULL, 0, NULL, 0}};
    int c, f;

    *o = (bench_opts_t){.ops = 1u << BENCH_ALLREDUCE,
                        .dtypes = 1u << BENCH_FP32,
                        .redops = 1u << BENCH_SUM,
                        .min_bytes = 8,
                        .max_bytes = 8u << 20,
                        .factor = 2,
                        .iters = 20,
                        .warmup = 5,
                        .check = 1};
    while ((c = getopt_long(argc, argv, "o:b:e:f:n:w:d:r:c:a:R:m:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (bench_parse_list("-o", optarg, bench_op_names, BENCH_OP_COUNT, &o->ops))
                return 2;
            break;
        case 'b':
            if (bench_parse_size("-b", optarg, &o->min_bytes))
                return 2;
            break;
        case 'e':
            if (bench_parse_size("-e", optarg, &o->max_bytes))
                return 2;
            break;
        case 'f':
            if (bench_parse_int("-f", optarg, 2, &f))
                return 2;
            o->factor = (size_t)f;
            break;
        case 'n':
            if (bench_parse_int("-n", optarg, 1, &o->iters))
                return 2;
            break;
        case 'w':
            if (bench_parse_int("-w", optarg, 0, &o->warmup))
                return 2;
            break;
        case 'd':
            if (bench_parse_list("-d", optarg, bench_dtype_names, BENCH_DTYPE_COUNT, &o->dtypes))
                return 2;
            break;
        case 'r':
            if (bench_parse_list("-r", optarg, bench_redop_names, BENCH_REDOP_COUNT, &o->redops))
                return 2;
            break;
        case 'c':
            if (bench_parse_int("-c", optarg, 0, &o->check) || o->check > 1) {
                fprintf(stderr, "error: -c expects 0 or 1\n");
                return 2;
            }
            break;
        case 'a':
            o->algo = optarg;
            break;
        case 'R':
            if (bench_parse_int("-R", optarg, 0, &o->root))
                return 2;
            break;
        case OPT_CSV:
            o->csv = optarg;
            break;
        case OPT_MEMCPY:
            o->memcpy_mode = 1;
            break;
        case OPT_MESH:
            if (bench_parse_mesh(optarg, o->mesh_size))
                return 2;
            o->mesh = optarg;
            break;
        case OPT_ORDER:
            o->order = optarg;
            break;
        case OPT_REORDER:
            o->reorder = 1;
            break;
        case OPT_AXES:
            o->axes = optarg;
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case OPT_PLOT:
            o->plot = optarg;
            break;
        case OPT_BYTES:
            o->bytes = 1;
            break;
        case OPT_SKEW: {
            char *end;
            o->skew = strtod(optarg, &end);
            if (end == optarg || *end || !(o->skew >= 0) || o->skew > 100) {
                fprintf(stderr, "error: --skew expects a number from 0 to 100, got '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_IDLE: {
            char *end;
            o->idle = strtod(optarg, &end);
            if (end == optarg || *end || !(o->idle > 0) || o->idle > 3600) {
                fprintf(stderr, "error: --idle expects seconds from 0 to 3600, got '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_MIN_TIME: {
            char *end;
            o->min_time = strtod(optarg, &end);
            if (end == optarg || *end || !(o->min_time >= 0) || o->min_time > 3600) {
                fprintf(stderr, "error: --min-time expects seconds from 0 to 3600, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'm':
            if (strcmp(optarg, "host") && strcmp(optarg, "device") && strcmp(optarg, "cuda") &&
                strcmp(optarg, "emu")) {
                fprintf(stderr, "error: -m expects host, device, cuda or emu, got '%s'\n", optarg);
                return 2;
            }
            o->mem = strcmp(optarg, "host") ? optarg : NULL;
            break;
        case OPT_DEVICE:
            o->mem = "device";
            break;
        case OPT_EP_PATH:
            if (strcmp(optarg, "flat") && strcmp(optarg, "hier") && strcmp(optarg, "auto")) {
                fprintf(stderr, "error: --ep-path expects flat, hier or auto, got '%s'\n", optarg);
                return 2;
            }
            o->ep_path = optarg;
            break;
        case 'h':
            printf(bench_usage, prog, strcmp(prog, "mpi-bench") ? "meshrun" : "mpirun");
            return 1;
        default:
            fprintf(stderr, "try '%s --help'\n", prog);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'; try '%s --help'\n", argv[optind], prog);
        return 2;
    }
    if (!o->mesh && (o->axes || o->order || o->reorder)) {
        fprintf(stderr, "error: --axes, --order and --reorder need --mesh\n");
        return 2;
    }
    if (o->axes && !*o->axes) {
        fprintf(stderr, "error: --axes: empty list\n");
        return 2;
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "error: -b %zu is larger than -e %zu\n", o->min_bytes, o->max_bytes);
        return 2;
    }
    return 0;
}

void bench_tune_string(const bench_opts_t *o, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    if (!o->algo)
        return;
    if (strchr(o->algo, ':')) {
        snprintf(buf, len, "%s", o->algo);
        return;
    }
    for (int op = 0; op < BENCH_OP_COUNT; op++) {
        if (!(o->ops & (1u << op)) || op == BENCH_SENDRECV || op == BENCH_DISPATCH_COMBINE)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s:%s", used ? "," : "", bench_op_names[op],
                         o->algo);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

void bench_sizes(bench_op_t op, bench_dtype_t d, size_t bytes, int nranks, bench_sizes_t *sz)
{
    size_t dsize = bench_dtype_size(d), n = (size_t)nranks;
    size_t total = bytes / dsize;
    switch (op) {
    case BENCH_REDUCE_SCATTER: /* count: each rank's result block */
    case BENCH_ALLGATHER:      /* count: each rank's contribution */
    case BENCH_ALLTOALL:       /* count: per peer */
    case BENCH_GATHER:
    case BENCH_SCATTER:
        sz->count = total / n;
        sz->bytes = sz->count * n * dsize;
        sz->sbytes = op == BENCH_ALLGATHER || op == BENCH_GATHER ? sz->count * dsize : sz->bytes;
        sz->rbytes =
            op == BENCH_REDUCE_SCATTER || op == BENCH_SCATTER ? sz->count * dsize : sz->bytes;
        break;
    case BENCH_DISPATCH_COMBINE: /* count: whole rows of BENCH_EP_HIDDEN when longer */
        sz->count = total > BENCH_EP_HIDDEN ? total - total % BENCH_EP_HIDDEN : total;
        sz->bytes = sz->sbytes = sz->rbytes = sz->count * dsize;
        break;
    default:
        sz->count = total;
        sz->bytes = sz->sbytes = sz->rbytes = total * dsize;
        break;
    }
}

double bench_recv_factor(bench_op_t op, int nranks)
{
    double n = nranks;
    switch (op) {
    case BENCH_ALLREDUCE:
        return 2.0 * (n - 1);
    case BENCH_BROADCAST:
    case BENCH_REDUCE:
    case BENCH_ALLGATHER:
    case BENCH_REDUCE_SCATTER:
    case BENCH_ALLTOALL:
        return n - 1;
    case BENCH_GATHER:
    case BENCH_SCATTER:
        return (n - 1) / n;
    case BENCH_SENDRECV:
        return n;
    default:
        return 0;
    }
}

double bench_busbw_factor(bench_op_t op, int nranks)
{
    double n = nranks;
    switch (op) {
    case BENCH_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case BENCH_REDUCE_SCATTER:
    case BENCH_ALLGATHER:
    case BENCH_ALLTOALL:
    case BENCH_GATHER:
    case BENCH_SCATTER:
        return (n - 1) / n;
    case BENCH_DISPATCH_COMBINE:
        return 2.0 * BENCH_EP_TOPK * (n - 1) / n;
    default:
        return 1.0;
    }
}
