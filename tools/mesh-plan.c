/*
 * mesh-plan: from a model, a cluster and a global batch to ranked 5D layouts (the planner of
 * parallel/plan), one layout checked (--check), or mesh-bench's per-axis measurements turned
 * into the cluster's figures (--calibrate) and compared with a second run (--compare).
 */
#include "config.h"
#include "tools/mesh-plan.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char plan_usage[] =
    "usage: mesh-plan --model NAME|SPEC (--cluster SPEC | --from-topo) [--batch TOKENS]\n"
    "                 [--fix LAYOUT] [--max-tp N] [--max-cp N] [--max-ep N] [--max-pp N]\n"
    "                 [--max-mbs N] [--zero LIST] [--schedule LIST] [--recompute LIST]\n"
    "                 [--no-sp] [--allow-span] [--calibrate FILE.csv] [--top N]\n"
    "                 [--rejected N] [--check LAYOUT] [--json]\n"
    "       mesh-plan --calibrate FILE.csv [--compare FILE2.csv] [--tolerance F] [--json]\n"
    "       mesh-plan --list-models | --list-clusters\n"
    "\n"
    "  --model M          a preset (--list-models), optionally followed by changes\n"
    "                     (llama3-70b,seq=32768), or KEY=VALUE,... with params, layers,\n"
    "                     hidden, heads, kv-heads, head-dim, ffn, gated, vocab, seq, tied,\n"
    "                     dropout, attn-params, experts, top-k, expert-ffn, shared-experts,\n"
    "                     dense-layers (the first layers without experts), moe-interval\n"
    "                     (then every n-th layer has experts), route-nodes (node-limited\n"
    "                     routing: a token's experts on at most n nodes), name\n"
    "  --cluster C        [PRESET,]gpus=N,gpus-per-node=K,gpu-mem=GiB,flops=TFLOP/s,\n"
    "                     intra-bw=GB/s,inter-bw=GB/s,intra-lat=us,inter-lat=us,eff=F,\n"
    "                     mem-bw=GB/s,reserve=GiB,nodes=N,precision=bf16|fp32,bucket=MiB,\n"
    "                     inflight=K (gradient bucket, reductions in flight; bandwidths\n"
    "                     are bus bandwidths per GPU; latencies per collective step; bf16:\n"
    "                     bf16 with an fp32 master, fp32: fp32 throughout, the cpu preset's)\n"
    "  --from-topo        this machine's node (GPUs, cores, NICs) times --nodes N;\n"
    "                     --ranks-per-node K for CPU ranks (default: one per core)\n"
    "  --batch TOKENS     global batch in tokens (k, m, g: powers of 1024); default the\n"
    "                     preset's published one; --batch-seqs N in sequences\n"
    "  --fix LAYOUT       fixed fields: tp=8,pp=16,zero=1,... (as --check); a fixed tp or ep\n"
    "                     may span nodes\n"
    "  --zero LIST        ZeRO stages allowed (0,1,2,3); --schedule LIST from afab, 1f1b,\n"
    "                     interleaved, zb1; --recompute LIST from none, selective, full\n"
    "  --no-sp            no sequence parallelism with tp\n"
    "  --allow-span       tp and ep may span nodes (else only when nothing fits otherwise)\n"
    "  --calibrate FILE   per-axis figures measured by mesh-bench --mesh ... --axes all\n"
    "                     --csv FILE replace the nominal ones\n"
    "  --compare FILE2    with --calibrate alone: the predicted time of each axis, op and\n"
    "                     size of FILE2 (a second mesh-bench run) against its measurement;\n"
    "                     exit 1 when one is off by more than --tolerance (default 0.25);\n"
    "                     sizes from --min-bytes (default 1m)\n"
    "  --check LAYOUT     one layout, tp=8,pp=8[,cp,ep,etp,dp,zero,mbs,schedule,vpp,recompute,\n"
    "                     sp,even]: axes not named are 1 (dp the rest), knobs not named the\n"
    "                     best; even=1: layers / pp on every stage (else the balanced split);\n"
    "                     exit 1 when it does not fit or cannot run\n"
    "  --top N            layouts shown (default 5); --rejected N rejected ones (default 8)\n"
    "  --json             one JSON object instead of text\n"
    "\n"
    "Exit status: 0 a layout fits; 1 nothing fits (the reasons are printed); 2 bad usage.\n";

static int plan_fail(const char *what)
{
    fprintf(stderr, "mesh-plan: %s\n", what);
    return 2;
}

/* A number with an optional suffix: decimal (k m b t) or binary (k m g) powers. */
static int plan_number(const char *s, size_t len, int binary, double *out)
{
    char buf[64], *end;
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || errno)
        return -1;
    double k = binary ? 1024.0 : 1000.0;
    switch (tolower((unsigned char)*end)) {
    case 0:
        break;
    case 'k':
        v *= k, end++;
        break;
    case 'm':
        v *= k * k, end++;
        break;
    case 'b':
    case 'g':
        v *= k * k * k, end++;
        break;
    case 't':
        v *= k * k * k * k, end++;
        break;
    default:
        return -1;
    }
    if (*end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int plan_key(const char *s, size_t len, const char *key)
{
    return strlen(key) == len && strncasecmp(s, key, len) == 0;
}

/* Walks KEY=VALUE,... calling set(key, klen, value, vlen); a first item without '=' names a
 * preset, which goes to preset(name). */
typedef int (*plan_kv_fn)(void *ctx, const char *k, size_t kl, const char *v, size_t vl);
typedef int (*plan_preset_fn)(void *ctx, const char *name);

static int plan_preset(void *ctx, plan_preset_fn preset, const char *s, size_t len)
{
    char name[64];
    if (len >= sizeof(name))
        return mesh_error_report(MESH_ERR_NOT_FOUND, "'%.*s' is not a preset", (int)len, s);
    snprintf(name, sizeof(name), "%.*s", (int)len, s);
    return preset(ctx, name);
}

static int plan_kv(const char *spec, void *ctx, plan_kv_fn set, plan_preset_fn preset,
                   const char *what)
{
    int i = 0;
    for (const char *s = spec; *s; i++) {
        size_t item = strcspn(s, ","), klen = strcspn(s, "=,");
        if (s[klen] != '=') {
            if (i == 0 && preset) {
                if (plan_preset(ctx, preset, s, item) != 0) {
                    fprintf(stderr, "mesh-plan: %s: %s\n", what, mesh_comm_last_error(NULL));
                    return -1;
                }
                s += item + (s[item] == ',');
                continue;
            }
            fprintf(stderr, "mesh-plan: %s: '%.*s' is not KEY=VALUE\n", what, (int)item, s);
            return -1;
        }
        if (set(ctx, s, klen, s + klen + 1, item - klen - 1) != 0)
            return -1;
        s += item + (s[item] == ',');
    }
    return 0;
}

static int plan_model_preset(void *ctx, const char *name)
{
    plan_opts_t *o = ctx;
    return mesh_plan_model_preset(name, &o->model) == MESH_OK ? 0 : -1;
}

static int plan_model_set(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    plan_opts_t *o = ctx;
    mesh_plan_model_t *m = &o->model;
    static const struct {
        const char *key;
        size_t off;
    } ints[] = {
        {"layers", offsetof(mesh_plan_model_t, layers)},
        {"hidden", offsetof(mesh_plan_model_t, hidden)},
        {"heads", offsetof(mesh_plan_model_t, heads)},
        {"kv-heads", offsetof(mesh_plan_model_t, kv_heads)},
        {"head-dim", offsetof(mesh_plan_model_t, head_dim)},
        {"ffn", offsetof(mesh_plan_model_t, ffn)},
        {"gated", offsetof(mesh_plan_model_t, gated)},
        {"vocab", offsetof(mesh_plan_model_t, vocab)},
        {"seq", offsetof(mesh_plan_model_t, seq)},
        {"tied", offsetof(mesh_plan_model_t, tied)},
        {"dropout", offsetof(mesh_plan_model_t, dropout)},
        {"experts", offsetof(mesh_plan_model_t, experts)},
        {"top-k", offsetof(mesh_plan_model_t, top_k)},
        {"expert-ffn", offsetof(mesh_plan_model_t, expert_ffn)},
        {"shared-experts", offsetof(mesh_plan_model_t, shared_experts)},
        {"dense-layers", offsetof(mesh_plan_model_t, dense_layers)},
        {"moe-interval", offsetof(mesh_plan_model_t, moe_interval)},
        {"route-nodes", offsetof(mesh_plan_model_t, route_nodes)},
    };
    double d;
    if (plan_key(k, kl, "name")) {
        snprintf(m->name, sizeof(m->name), "%.*s", (int)vl, v);
        return 0;
    }
    int params = plan_key(k, kl, "params"), attn = plan_key(k, kl, "attn-params");
    if (plan_number(v, vl, 0, &d) != 0 || d < 0 || (!params && !attn && d > 2e9)) {
        fprintf(stderr, "mesh-plan: --model: %.*s=%.*s is not a number%s\n", (int)kl, k, (int)vl, v,
                params ? " (suffixes k, m, b, t)" : "");
        return -1;
    }
    if (params)
        m->params = d;
    else if (attn)
        m->attn_params = d;
    else {
        size_t i;
        for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
            if (plan_key(k, kl, ints[i].key))
                break;
        if (i == sizeof(ints) / sizeof(ints[0])) {
            fprintf(stderr,
                    "mesh-plan: --model: unknown key '%.*s' (mesh-plan --help names "
                    "them)\n",
                    (int)kl, k);
            return -1;
        }
        if (d != floor(d)) {
            fprintf(stderr, "mesh-plan: --model: %.*s must be a whole number\n", (int)kl, k);
            return -1;
        }
        *(int *)((char *)m + ints[i].off) = (int)d;
    }
    return 0;
}

static int plan_cluster_preset(void *ctx, const char *name)
{
    plan_opts_t *o = ctx;
    return mesh_plan_cluster_preset(name, 0, &o->cluster) == MESH_OK ? 0 : -1;
}

static int plan_cluster_set(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    plan_opts_t *o = ctx;
    mesh_plan_cluster_t *c = &o->cluster;
    double d;
    if (plan_key(k, kl, "precision")) {
        if (plan_key(v, vl, "fp32") || plan_key(v, vl, "bf16")) {
            c->precision = plan_key(v, vl, "fp32") ? MESH_PLAN_PREC_FP32 : MESH_PLAN_PREC_BF16;
            return 0;
        }
        fprintf(stderr, "mesh-plan: --cluster: precision=%.*s is not fp32 or bf16\n", (int)vl, v);
        return -1;
    }
    if (plan_number(v, vl, 0, &d) != 0 || d < 0) {
        fprintf(stderr, "mesh-plan: --cluster: %.*s=%.*s is not a number\n", (int)kl, k, (int)vl,
                v);
        return -1;
    }
    if (plan_key(k, kl, "gpus"))
        c->gpus = (int)d;
    else if (plan_key(k, kl, "nodes"))
        o->nodes = (int)d;
    else if (plan_key(k, kl, "gpus-per-node"))
        c->gpus_per_node = (int)d;
    else if (plan_key(k, kl, "gpu-mem"))
        c->gpu_mem = d * 1024.0 * 1024 * 1024;
    else if (plan_key(k, kl, "flops"))
        c->flops = d * 1e12;
    else if (plan_key(k, kl, "eff"))
        c->efficiency = d;
    else if (plan_key(k, kl, "mem-bw"))
        c->mem_bw = d * 1e9;
    else if (plan_key(k, kl, "intra-bw"))
        c->intra_bw = d * 1e9;
    else if (plan_key(k, kl, "inter-bw"))
        c->inter_bw = d * 1e9;
    else if (plan_key(k, kl, "intra-lat"))
        c->intra_lat = d * 1e-6;
    else if (plan_key(k, kl, "inter-lat"))
        c->inter_lat = d * 1e-6;
    else if (plan_key(k, kl, "reserve"))
        c->reserve = d * 1024.0 * 1024 * 1024;
    else if (plan_key(k, kl, "bucket"))
        c->bucket_bytes = d * 1024.0 * 1024;
    else if (plan_key(k, kl, "inflight"))
        c->inflight = (int)d;
    else {
        fprintf(stderr,
                "mesh-plan: --cluster: unknown key '%.*s' (gpus, nodes, gpus-per-node, "
                "gpu-mem, flops, eff, mem-bw, intra-bw, inter-bw, intra-lat, inter-lat, "
                "reserve, bucket, inflight, precision)\n",
                (int)kl, k);
        return -1;
    }
    return 0;
}

/* "0,1,2" or names into a bit mask. */
static int plan_mask(const char *list, const char *what, unsigned *mask)
{
    *mask = 0;
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        char item[160];
        int v = -1;
        snprintf(item, sizeof(item), "%.*s", (int)(len < 120 ? len : 120), s);
        if (strcmp(what, "zero") == 0) {
            if (len == 1 && *s >= '0' && *s <= '3')
                v = *s - '0';
        } else {
            mesh_plan_layout_t l = {0};
            unsigned set = 0;
            char spec[300];
            snprintf(spec, sizeof(spec), "%s=%s", what, item);
            if (mesh_plan_layout_parse(spec, &l, &set) == MESH_OK)
                v = strcmp(what, "schedule") == 0 ? (int)l.schedule : (int)l.recompute;
        }
        if (v < 0) {
            fprintf(stderr, "mesh-plan: --%s: '%s' is not one of %s\n", what, item,
                    strcmp(what, "zero") == 0       ? "0, 1, 2, 3"
                    : strcmp(what, "schedule") == 0 ? "afab, 1f1b, interleaved, zb1"
                                                    : "none, selective, full");
            return -1;
        }
        *mask |= 1u << v;
        s += len + (s[len] == ',');
    }
    return 0;
}

static int plan_int_arg(const char *s, const char *what, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > (1 << 24)) {
        fprintf(stderr, "mesh-plan: %s %s is not a number >= %d\n", what, s, lo);
        return -1;
    }
    *out = (int)v;
    return 0;
}

enum {
    O_MODEL = 256,
    O_CLUSTER,
    O_TOPO,
    O_NODES,
    O_RPN,
    O_BATCH,
    O_BSEQS,
    O_FIX,
    O_MAXTP,
    O_MAXCP,
    O_MAXEP,
    O_MAXPP,
    O_MAXMBS,
    O_ZERO,
    O_SCHED,
    O_RC,
    O_NOSP,
    O_SPAN,
    O_CALIB,
    O_COMPARE,
    O_TOL,
    O_MINB,
    O_CHECK,
    O_TOP,
    O_REJ,
    O_JSON,
    O_LM,
    O_LC
};

static int plan_parse(int argc, char **argv, plan_opts_t *o)
{
    static const struct option lo[] = {{"model", 1, 0, O_MODEL},
                                       {"cluster", 1, 0, O_CLUSTER},
                                       {"from-topo", 0, 0, O_TOPO},
                                       {"nodes", 1, 0, O_NODES},
                                       {"ranks-per-node", 1, 0, O_RPN},
                                       {"batch", 1, 0, O_BATCH},
                                       {"batch-seqs", 1, 0, O_BSEQS},
                                       {"fix", 1, 0, O_FIX},
                                       {"max-tp", 1, 0, O_MAXTP},
                                       {"max-cp", 1, 0, O_MAXCP},
                                       {"max-ep", 1, 0, O_MAXEP},
                                       {"max-pp", 1, 0, O_MAXPP},
                                       {"max-mbs", 1, 0, O_MAXMBS},
                                       {"zero", 1, 0, O_ZERO},
                                       {"schedule", 1, 0, O_SCHED},
                                       {"recompute", 1, 0, O_RC},
                                       {"no-sp", 0, 0, O_NOSP},
                                       {"allow-span", 0, 0, O_SPAN},
                                       {"calibrate", 1, 0, O_CALIB},
                                       {"compare", 1, 0, O_COMPARE},
                                       {"tolerance", 1, 0, O_TOL},
                                       {"min-bytes", 1, 0, O_MINB},
                                       {"check", 1, 0, O_CHECK},
                                       {"top", 1, 0, O_TOP},
                                       {"rejected", 1, 0, O_REJ},
                                       {"json", 0, 0, O_JSON},
                                       {"list-models", 0, 0, O_LM},
                                       {"list-clusters", 0, 0, O_LC},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    mesh_plan_params_t *p = &o->params;
    const char *cluster = NULL, *batch = NULL, *bseqs = NULL;
    int c;
    o->top = 5;
    o->rejected = 8;
    o->tolerance = 0.25;
    o->min_bytes = 1 << 20;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case O_MODEL:
            memset(&o->model, 0, sizeof(o->model));
            if (plan_kv(optarg, o, plan_model_set, plan_model_preset, "--model") != 0)
                return -1;
            o->model_changes = NULL;
            if (o->model.source && strchr(optarg, '='))
                o->model_changes = strchr(optarg, ',') + 1;
            o->have_model = 1;
            break;
        case O_CLUSTER:
            cluster = optarg;
            break;
        case O_TOPO:
            o->from_topo = 1;
            break;
        case O_NODES:
            if (plan_int_arg(optarg, "--nodes", 1, &o->nodes))
                return -1;
            break;
        case O_RPN:
            if (plan_int_arg(optarg, "--ranks-per-node", 1, &o->ranks_per_node))
                return -1;
            break;
        case O_BATCH:
            batch = optarg;
            break;
        case O_BSEQS:
            bseqs = optarg;
            break;
        case O_FIX:
            if (mesh_plan_layout_parse(optarg, &p->fix, &p->fix_set) != MESH_OK) {
                fprintf(stderr, "mesh-plan: --fix: %s\n", mesh_comm_last_error(NULL));
                return -1;
            }
            p->field_mask |= MESH_PLAN_PARAM_FIELD_FIX;
            break;
        case O_MAXTP:
        case O_MAXCP:
        case O_MAXEP:
        case O_MAXPP:
        case O_MAXMBS: {
            int *dst = c == O_MAXTP   ? &p->max_tp
                       : c == O_MAXCP ? &p->max_cp
                       : c == O_MAXEP ? &p->max_ep
                       : c == O_MAXPP ? &p->max_pp
                                      : &p->max_mbs;
            static const char *const names[] = {"--max-tp", "--max-cp", "--max-ep", "--max-pp",
                                                "--max-mbs"};
            if (plan_int_arg(optarg, names[c - O_MAXTP], 1, dst))
                return -1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_LIMITS;
            break;
        }
        case O_ZERO:
            if (plan_mask(optarg, "zero", &p->zero_mask))
                return -1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES;
            break;
        case O_SCHED:
            if (plan_mask(optarg, "schedule", &p->schedule_mask))
                return -1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES;
            break;
        case O_RC:
            if (plan_mask(optarg, "recompute", &p->recompute_mask))
                return -1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES;
            break;
        case O_NOSP:
            p->no_sp = 1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES;
            break;
        case O_SPAN:
            p->allow_span = 1;
            p->field_mask |= MESH_PLAN_PARAM_FIELD_SPAN;
            break;
        case O_CALIB:
            o->calib_path = optarg;
            break;
        case O_COMPARE:
            o->compare_path = optarg;
            break;
        case O_TOL:
            o->tolerance = strtod(optarg, NULL);
            if (!(o->tolerance > 0))
                return plan_fail("--tolerance must be positive"), -1;
            break;
        case O_MINB:
            if (plan_number(optarg, strlen(optarg), 1, &o->min_bytes) || o->min_bytes < 0)
                return plan_fail("--min-bytes is not a size"), -1;
            break;
        case O_CHECK:
            o->check = optarg;
            break;
        case O_TOP:
            if (plan_int_arg(optarg, "--top", 1, &o->top))
                return -1;
            break;
        case O_REJ:
            if (plan_int_arg(optarg, "--rejected", 0, &o->rejected))
                return -1;
            break;
        case O_JSON:
            o->json = 1;
            break;
        case O_LM:
            o->list_models = 1;
            break;
        case O_LC:
            o->list_clusters = 1;
            break;
        case 'h':
            fputs(plan_usage, stdout);
            exit(0);
        default:
            fputs(plan_usage, stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mesh-plan: unexpected argument '%s'\n%s", argv[optind], plan_usage);
        return -1;
    }
    if (o->list_models || o->list_clusters)
        return 0;
    if (o->calib_path && !o->have_model)
        return 0; /* --calibrate alone, or with --compare */
    if (o->compare_path)
        return plan_fail("--compare goes with --calibrate alone"), -1;
    if (!o->have_model)
        return plan_fail("--model is required (mesh-plan --help)"), -1;
    if (!cluster && !o->from_topo)
        return plan_fail("give --cluster or --from-topo"), -1;
    o->have_cluster = cluster != NULL;
    if (o->from_topo) {
        if (plan_topo_cluster(o) != 0)
            return -1;
        /* --cluster KEY=VALUE,... completes or corrects what the topology says */
        if (cluster && plan_kv(cluster, o, plan_cluster_set, NULL, "--cluster") != 0)
            return -1;
    } else {
        memset(&o->cluster, 0, sizeof(o->cluster));
        if (plan_kv(cluster, o, plan_cluster_set, plan_cluster_preset, "--cluster") != 0)
            return -1;
        mesh_plan_cluster_t *cl = &o->cluster;
        if (o->nodes > 0) {
            if (cl->gpus_per_node < 1)
                return plan_fail("--cluster: nodes= needs gpus-per-node= (or a preset)"), -1;
            cl->gpus = o->nodes * cl->gpus_per_node;
        }
        if (cl->gpus_per_node == 0)
            cl->gpus_per_node = cl->gpus;
    }
    if (batch && bseqs)
        return plan_fail("give one of --batch and --batch-seqs"), -1;
    if (batch || bseqs) {
        double v;
        const char *s = batch ? batch : bseqs;
        if (plan_number(s, strlen(s), 1, &v) || !(v >= 1) || v != floor(v))
            return plan_fail(batch ? "--batch is not a number of tokens"
                                   : "--batch-seqs is not a number of sequences"),
                   -1;
        p->batch_tokens = batch ? v : v * (o->model.seq > 0 ? o->model.seq : 1);
        p->field_mask |= MESH_PLAN_PARAM_FIELD_BATCH;
    }
    p->top = o->check ? 1 : o->top;
    p->field_mask |= MESH_PLAN_PARAM_FIELD_TOP;
    return 0;
}

/* --check: the axes named, the others 1 (dp the rest); knobs not named are searched. */
static int plan_check_params(plan_opts_t *o)
{
    mesh_plan_params_t *p = &o->params;
    mesh_plan_layout_t l = {0};
    unsigned set = 0;
    if (mesh_plan_layout_parse(o->check, &l, &set) != MESH_OK) {
        fprintf(stderr, "mesh-plan: --check: %s\n", mesh_comm_last_error(NULL));
        return -1;
    }
    if (!(set & MESH_PLAN_SET_TP))
        l.tp = 1;
    if (!(set & MESH_PLAN_SET_CP))
        l.cp = 1;
    if (!(set & MESH_PLAN_SET_EP))
        l.ep = 1;
    if (!(set & MESH_PLAN_SET_PP))
        l.pp = 1;
    if (!(set & MESH_PLAN_SET_ETP))
        l.etp = l.tp;
    if ((set & MESH_PLAN_SET_SP) && !l.sp) {
        p->no_sp = 1;
        p->field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES;
    }
    p->fix = l;
    p->fix_set = set | MESH_PLAN_SET_TP | MESH_PLAN_SET_CP | MESH_PLAN_SET_EP | MESH_PLAN_SET_PP |
                 MESH_PLAN_SET_ETP;
    p->allow_span = 1;
    p->field_mask |= MESH_PLAN_PARAM_FIELD_FIX | MESH_PLAN_PARAM_FIELD_SPAN;
    return 0;
}

static int plan_calibrate_only(plan_opts_t *o)
{
    if (!o->compare_path) {
        plan_print_calib(o, stdout);
        return 0;
    }
    mesh_plan_calib_t *second;
    if (mesh_plan_calib_load(o->compare_path, &second) != MESH_OK) {
        fprintf(stderr, "mesh-plan: --compare: %s\n", mesh_comm_last_error(NULL));
        return 2;
    }
    int rc = plan_compare(o, second, stdout);
    mesh_plan_calib_free(second);
    return rc;
}

int main(int argc, char **argv)
{
    plan_opts_t o;
    memset(&o, 0, sizeof(o));
    /* this tool reports the library's errors itself; its log would say them twice */
    setenv("MESH_LOG_LEVEL", "error", 0);
    if (plan_parse(argc, argv, &o) != 0)
        return 2;
    if (o.list_models || o.list_clusters) {
        if (o.list_models)
            plan_list_models(o.json, stdout);
        if (o.list_clusters)
            plan_list_clusters(o.json, stdout);
        return 0;
    }
    if (o.calib_path) {
        if (mesh_plan_calib_load(o.calib_path, &o.calib) != MESH_OK) {
            fprintf(stderr, "mesh-plan: --calibrate: %s\n", mesh_comm_last_error(NULL));
            return 2;
        }
        if (!o.have_model) {
            int rc = plan_calibrate_only(&o);
            mesh_plan_calib_free(o.calib);
            return rc;
        }
        o.cluster.calib = o.calib;
    }
    double total;
    if (mesh_plan_model_count(&o.model, &total, NULL) != MESH_OK ||
        mesh_plan_cluster_check(&o.cluster, &o.cluster) != MESH_OK) {
        fprintf(stderr, "mesh-plan: %s\n", mesh_comm_last_error(NULL));
        mesh_plan_calib_free(o.calib);
        return 2;
    }
    mesh_plan_model_t counted = o.model;
    counted.params = 0;
    mesh_plan_model_count(&counted, &o.model_counted, NULL);
    if (o.check && plan_check_params(&o) != 0) {
        mesh_plan_calib_free(o.calib);
        return 2;
    }
    mesh_plan_result_h r;
    if (mesh_plan_search(&o.model, &o.cluster, &o.params, &r) != MESH_OK) {
        fprintf(stderr, "mesh-plan: %s\n", mesh_comm_last_error(NULL));
        mesh_plan_calib_free(o.calib);
        return 2;
    }
    if (o.json)
        plan_json_result(&o, r, o.check ? "check" : "plan", stdout);
    else
        plan_print_result(&o, r, stdout);
    int rc = mesh_plan_result_count(r) > 0 ? 0 : 1;
    mesh_plan_result_free(r);
    mesh_plan_calib_free(o.calib);
    return rc;
}
