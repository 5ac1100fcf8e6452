/* mesh-train's options and --help. */
#include "opts.h"
#include "text.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* only the first rank reports a bad option: every rank parses the same line */
#define SAY(...) (say ? fprintf(stderr, __VA_ARGS__) : 0)

static const char usage[] =
    "usage: meshrun -n N mesh-train [options]\n"
    "A small GPT (token and position embeddings, L blocks of layernorm, causal multi-head\n"
    "self-attention, layernorm and GELU MLP with residuals, final layernorm, LM head tied to the\n"
    "token embedding, cross-entropy) trained on a 5D mesh; the loss curve is the same on every\n"
    "layout.\n"
    "\n"
    "layout:\n"
    "  --mesh tp=A,pp=P,dp=B,cp=C,ep=E  axis sizes; they multiply to the number of ranks, dp by\n"
    "                         default takes what the others leave (default: dp = all ranks);\n"
    "                         cp splits the sequence over C ranks (see --cp-*), beside any\n"
    "                         other axis (with --experts: dropless only); ep (with\n"
    "                         --experts) spreads the experts over ep ranks taken from the\n"
    "                         data-parallel ones: the dense layers are data-parallel over\n"
    "                         dp x ep\n"
    "  --mesh auto[,AXIS=N]   (or --plan) the layout from the planner (<mesh/plan.h>, as\n"
    "                         tools/mesh-plan) for this model, --batch and the ranks and nodes\n"
    "                         of the run, as CPU ranks, among what mesh-train runs (no\n"
    "                         recomputation; the axes together as --mesh takes them): tp, cp,\n"
    "                         ep (with --experts), pp, dp, --zero, --schedule, --chunks and\n"
    "                         --microbatches not given are its choice;\n"
    "                         the choice, its predicted step time and the planner's reasons\n"
    "                         are printed before the first step\n"
    "  --schedule S           pipeline schedule with pp > 1: afab, 1f1b (default), interleaved,\n"
    "                         zb1 or zbv; the blocks are split evenly over pp x chunks stages,\n"
    "                         the embedding on the first, final layernorm, head and loss on the\n"
    "                         last (the tied token table on both, its gradient summed between\n"
    "                         them); --microbatches is the schedule's micro-batch count\n"
    "  --chunks V             model chunks per pp rank (interleaved: default 2; zbv: 2; else 1)\n"
    "  --order O              rank order of the axes, innermost first (default tp-cp-ep-dp-pp)\n"
    "  --sequence-parallel    split activations outside tp regions along the sequence\n"
    "  --cp-zigzag            with cp > 1: rank i holds chunks i and 2 cp - 1 - i of the\n"
    "                         sequence cut in 2 cp (--seq must divide), not the i-th run\n"
    "  --cp-algo A            cp attention: ring (default; K/V blocks passed round under the\n"
    "                         compute) or allgather (K and V gathered whole)\n"
    "  --cp-no-overlap        the ring waits for each K/V block before computing it\n"
    "  --zero S               ZeRO stage 0..3 over dp (default 0)\n"
    "  --no-overlap           reduce gradients after the backward pass, not under it\n"
    "  --bucket-mb X          gradient bucket size in MiB (default 4)\n"
    "  --reductions-in-flight K  gradient buckets reduced at once; the oldest is waited for\n"
    "                         before one more starts (default 2)\n"
    "model:\n"
    "  --layers L (2)  --d-model C (64)  --heads H (4)  --seq T (16)  --vocab V (128)\n"
    "  --dtype fp32|bf16      parameters and gradients (default fp32; fp32 master weights)\n"
    "mixture of experts:\n"
    "  --experts E            the MLP of the chosen blocks becomes a router (linear d_model ->\n"
    "                         E without bias, softmax) and E GELU expert MLPs without biases\n"
    "                         (default 0: none); their tensors are reduced over the expert\n"
    "                         data-parallel group, the rest over dp x ep\n"
    "  --topk K               experts per token (default 2, at most E), weighted by their router\n"
    "                         probabilities (not renormalised)\n"
    "  --expert-ffn F         hidden width of each expert (default 4 d_model, the dense MLP's)\n"
    "  --moe-layers LIST      blocks with experts, 0-based, comma-separated, or all (default:\n"
    "                         every other block, 1, 3, 5, ...)\n"
    "  --capacity F           capacity factor: an expert takes at most ceil(F tokens K / E) of a\n"
    "                         micro-batch's tokens of its ep group, the first in token order\n"
    "                         (default 0: dropless)\n"
    "  --capacity-groups G    the capacity counts each of G equal parts of a micro-batch apart,\n"
    "                         as G ep groups do (default: the run's ep groups, edp; with ep=1\n"
    "                         a multiple of them): one process given G drops as a layout of G\n"
    "                         ep groups\n"
    "  --aux-loss X           coefficient of the load-balancing loss E sum_e f_e P_e, per MoE\n"
    "                         block over every dp rank's tokens of a micro-batch, averaged over\n"
    "                         micro-batches (default 0.01)\n"
    "training:\n"
    "  --batch B              global batch in samples (default 8)\n"
    "  --microbatches M       micro-batches per rank and step (default 1): micro-batch m is\n"
    "                         samples m B/M .. (m+1) B/M - 1 of the step, dp rank r taking\n"
    "                         the r-th B/(M dp) of them\n"
    "  --steps S (10)  --lr X (1e-3)  --seed N (1)  --clip X (1.0, 0: none)\n"
    "  --weight-decay X (0)\n"
    "output:\n"
    "  --csv FILE             step,loss,grad_norm,time_ms,tokens_per_s (layout in a # header;\n"
    "                         with --experts also aux_loss,dropped: the load-balancing loss and\n"
    "                         the token choices the capacity dropped in the step)\n"
    "  --save DIR / --load DIR  checkpoint after the last step / resume from one\n"
    "  --dump-params FILE     every parameter whole after the last step, in a fixed order\n"
    "  --quiet                no per-step lines\n"
    "  --comm-report          per step and axis (tp cp pp ep dp): bytes sent, exposed\n"
    "                         communication time, compute time; in the CSV too\n"
    "text:\n"
    "  --data PATH            train on a text file, or on a folder's files (in name order,\n"
    "                         links skipped), one token per byte (--vocab 256); every sample\n"
    "                         is a window of the training tokens placed by (--seed, step,\n"
    "                         sample), the same global batch on every layout. The unigram\n"
    "                         entropy of the corpus is printed (nats per byte, as the loss).\n"
    "                         With --csv, a val_loss column, and FILE.png beside FILE.csv (train\n"
    "                         and validation loss against steps, with gnuplot)\n"
    "  --bpe M                a byte-pair encoding instead: M merges learnt on the training\n"
    "                         bytes (each the most frequent pair), --vocab 256 + M; the loss\n"
    "                         and the entropy are then in nats per token\n"
    "  --val-frac F           the last fraction F of the bytes validates (default 0.1)\n"
    "  --val-every N          validation loss every N steps and after the last (default 0: after\n"
    "                         the last only), over --val-batches K (default 4) fixed batches\n"
    "                         of --batch windows of the validation tokens\n"
    "  --sample N             after the last step (or the --load checkpoint's, with --steps\n"
    "                         no higher), N tokens generated after --prompt TEXT (default\n"
    "                         \"The \") are printed between '# sample' and '# end of sample'\n"
    "                         lines: the most likely token each time, or with --temperature X\n"
    "                         drawn from the softmax of logits / X with --sample-seed N (1)\n";

static int sizes(train_opts_t *o, const char *arg, int say)
{
    static const char *const names[MESH_AXIS_COUNT] = {"tp", "cp", "ep", "dp", "pp"};
    char *copy = strdup(arg), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "auto")) {
            o->plan = 1;
            continue;
        }
        char *eq = strchr(tok, '=');
        int a = -1;
        for (int i = 0; eq && i < MESH_AXIS_COUNT; i++)
            if ((size_t)(eq - tok) == strlen(names[i]) && !strncmp(tok, names[i], eq - tok))
                a = i;
        int v = eq ? atoi(eq + 1) : 0;
        if (a < 0 || v < 1) {
            SAY("mesh-train: --mesh %s: '%s' is neither auto nor AXIS=SIZE with AXIS one of "
                "tp, dp, pp, cp, ep\n",
                arg, tok);
            free(copy);
            return -1;
        }
        o->size[a] = v;
    }
    free(copy);
    return 0;
}

/* "all" or 0-based block numbers, comma-separated */
static int moe_layers(train_opts_t *o, const char *arg, int say)
{
    if (!strcmp(arg, "all")) {
        o->moe_layers = ~(uint64_t)0;
        return 0;
    }
    char *copy = strdup(arg), *save = NULL;
    int rc = 0;
    o->moe_layers = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 0 || v > 63) {
            SAY("mesh-train: --moe-layers %s: '%s' is not a block number 0..63 (or use all)\n", arg,
                tok);
            rc = -1;
        }
        o->moe_layers |= (uint64_t)1 << (v & 63);
    }
    if (rc == 0 && !o->moe_layers) {
        SAY("mesh-train: --moe-layers %s names no block\n", arg);
        rc = -1;
    }
    free(copy);
    return rc;
}

static int positive(const char *opt, const char *arg, int *out, int say)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (*end || v < 1 || v > 1 << 24) {
        SAY("mesh-train: %s %s: a positive integer is needed\n", opt, arg);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int train_opts_parse(train_opts_t *o, int argc, char **argv, int print)
{
    int say = print;
    *o = (train_opts_t){.layers = 2,
                        .d_model = 64,
                        .heads = 4,
                        .seq = 16,
                        .vocab = 128,
                        .batch = 8,
                        .microbatches = 1,
                        .steps = 10,
                        .lr = 1e-3,
                        .clip = 1.0,
                        .seed = 1,
                        .overlap = 1,
                        .bucket_mb = 4,
                        .inflight = 2,
                        .topk = 2,
                        .aux_loss = 0.01,
                        .val_frac = 0.1,
                        .val_batches = 4,
                        .prompt = "The ",
                        .sample_seed = 1};
    enum {
        MESH = 256,
        PLAN,
        ORDER,
        ZERO,
        LAYERS,
        DMODEL,
        HEADS,
        SEQ,
        VOCAB,
        BATCH,
        MB,
        STEPS,
        LR,
        SEED,
        DTYPE,
        SP,
        CPZIGZAG,
        CPALGO,
        CPNOOVERLAP,
        CSV,
        SAVE,
        LOAD,
        NOOVERLAP,
        DUMP,
        CLIP,
        WD,
        BUCKET,
        INFLIGHT,
        QUIET,
        COMMREPORT,
        SCHEDULE,
        CHUNKS,
        EXPERTS,
        TOPK,
        EXPERT_FFN,
        MOE_LAYERS,
        CAPACITY,
        AUX,
        CAPACITY_GROUPS,
        DATA,
        BPE,
        VALFRAC,
        VALEVERY,
        VALBATCHES,
        SAMPLE,
        PROMPT,
        TEMPERATURE,
        SAMPLESEED,
        HELP
    };
    static const struct option longs[] = {{"mesh", 1, 0, MESH},
                                          {"plan", 0, 0, PLAN},
                                          {"order", 1, 0, ORDER},
                                          {"zero", 1, 0, ZERO},
                                          {"layers", 1, 0, LAYERS},
                                          {"d-model", 1, 0, DMODEL},
                                          {"heads", 1, 0, HEADS},
                                          {"seq", 1, 0, SEQ},
                                          {"vocab", 1, 0, VOCAB},
                                          {"batch", 1, 0, BATCH},
                                          {"microbatches", 1, 0, MB},
                                          {"steps", 1, 0, STEPS},
                                          {"lr", 1, 0, LR},
                                          {"seed", 1, 0, SEED},
                                          {"dtype", 1, 0, DTYPE},
                                          {"sequence-parallel", 0, 0, SP},
                                          {"cp-zigzag", 0, 0, CPZIGZAG},
                                          {"cp-algo", 1, 0, CPALGO},
                                          {"cp-no-overlap", 0, 0, CPNOOVERLAP},
                                          {"csv", 1, 0, CSV},
                                          {"save", 1, 0, SAVE},
                                          {"load", 1, 0, LOAD},
                                          {"no-overlap", 0, 0, NOOVERLAP},
                                          {"dump-params", 1, 0, DUMP},
                                          {"clip", 1, 0, CLIP},
                                          {"weight-decay", 1, 0, WD},
                                          {"bucket-mb", 1, 0, BUCKET},
                                          {"reductions-in-flight", 1, 0, INFLIGHT},
                                          {"quiet", 0, 0, QUIET},
                                          {"comm-report", 0, 0, COMMREPORT},
                                          {"schedule", 1, 0, SCHEDULE},
                                          {"chunks", 1, 0, CHUNKS},
                                          {"experts", 1, 0, EXPERTS},
                                          {"topk", 1, 0, TOPK},
                                          {"expert-ffn", 1, 0, EXPERT_FFN},
                                          {"moe-layers", 1, 0, MOE_LAYERS},
                                          {"capacity", 1, 0, CAPACITY},
                                          {"aux-loss", 1, 0, AUX},
                                          {"capacity-groups", 1, 0, CAPACITY_GROUPS},
                                          {"data", 1, 0, DATA},
                                          {"bpe", 1, 0, BPE},
                                          {"val-frac", 1, 0, VALFRAC},
                                          {"val-every", 1, 0, VALEVERY},
                                          {"val-batches", 1, 0, VALBATCHES},
                                          {"sample", 1, 0, SAMPLE},
                                          {"prompt", 1, 0, PROMPT},
                                          {"temperature", 1, 0, TEMPERATURE},
                                          {"sample-seed", 1, 0, SAMPLESEED},
                                          {"help", 0, 0, HELP},
                                          {0, 0, 0, 0}};
    opterr = print;
    optind = 1;
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case MESH:
            rc = sizes(o, optarg, say);
            break;
        case PLAN:
            o->plan = 1;
            break;
        case ORDER:
            o->order = optarg;
            break;
        case ZERO:
            if (strlen(optarg) != 1 || optarg[0] < '0' || optarg[0] > '3') {
                SAY("mesh-train: --zero %s: stages are 0, 1, 2 and 3\n", optarg);
                rc = -1;
            }
            o->zero = atoi(optarg);
            o->zero_given = 1;
            break;
        case LAYERS:
            rc = positive("--layers", optarg, &o->layers, say);
            break;
        case DMODEL:
            rc = positive("--d-model", optarg, &o->d_model, say);
            break;
        case HEADS:
            rc = positive("--heads", optarg, &o->heads, say);
            break;
        case SEQ:
            rc = positive("--seq", optarg, &o->seq, say);
            break;
        case VOCAB:
            rc = positive("--vocab", optarg, &o->vocab, say);
            o->vocab_given = 1;
            break;
        case BATCH:
            rc = positive("--batch", optarg, &o->batch, say);
            break;
        case MB:
            rc = positive("--microbatches", optarg, &o->microbatches, say);
            o->microbatches_given = 1;
            break;
        case STEPS:
            rc = positive("--steps", optarg, &o->steps, say);
            break;
        case LR:
            o->lr = atof(optarg);
            break;
        case CLIP:
            o->clip = atof(optarg);
            break;
        case WD:
            o->weight_decay = atof(optarg);
            break;
        case BUCKET:
            o->bucket_mb = atof(optarg);
            break;
        case INFLIGHT:
            o->inflight = atoi(optarg);
            if (o->inflight < 1) {
                SAY("mesh-train: --reductions-in-flight %s: a whole number >= 1\n", optarg);
                rc = -1;
            }
            break;
        case SEED:
            o->seed = strtoull(optarg, NULL, 0);
            break;
        case DTYPE:
            if (strcmp(optarg, "fp32") && strcmp(optarg, "bf16")) {
                SAY("mesh-train: --dtype %s: fp32 or bf16\n", optarg);
                rc = -1;
            }
            o->bf16 = !strcmp(optarg, "bf16");
            break;
        case SP:
            o->sequence_parallel = 1;
            break;
        case CPZIGZAG:
            o->cp_zigzag = 1;
            break;
        case CPALGO:
            if (strcmp(optarg, "ring") && strcmp(optarg, "allgather")) {
                SAY("mesh-train: --cp-algo %s: ring or allgather\n", optarg);
                rc = -1;
            }
            o->cp_algo = optarg;
            break;
        case CPNOOVERLAP:
            o->cp_no_overlap = 1;
            break;
        case CSV:
            o->csv = optarg;
            break;
        case SAVE:
            o->save = optarg;
            break;
        case LOAD:
            o->load = optarg;
            break;
        case NOOVERLAP:
            o->overlap = 0;
            break;
        case DUMP:
            o->dump = optarg;
            break;
        case QUIET:
            o->quiet = 1;
            break;
        case COMMREPORT:
            o->comm_report = 1;
            break;
        case SCHEDULE:
            o->schedule = optarg;
            break;
        case CHUNKS:
            rc = positive("--chunks", optarg, &o->chunks, say);
            break;
        case EXPERTS:
            rc = positive("--experts", optarg, &o->experts, say);
            break;
        case TOPK:
            rc = positive("--topk", optarg, &o->topk, say);
            break;
        case EXPERT_FFN:
            rc = positive("--expert-ffn", optarg, &o->expert_ffn, say);
            break;
        case CAPACITY_GROUPS:
            rc = positive("--capacity-groups", optarg, &o->capacity_groups, say);
            break;
        case MOE_LAYERS:
            rc = moe_layers(o, optarg, say);
            break;
        case CAPACITY:
        case AUX: {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || !(v >= 0 && v < 1e9)) {
                SAY("mesh-train: %s %s: a number >= 0 is needed\n",
                    c == AUX ? "--aux-loss" : "--capacity", optarg);
                rc = -1;
            }
            *(c == AUX ? &o->aux_loss : &o->capacity) = v;
            break;
        }
        case DATA:
            o->data = optarg;
            break;
        case VALFRAC:
        case TEMPERATURE: {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || !(v >= 0 && v < (c == VALFRAC ? 1 : 1e6))) {
                SAY("mesh-train: %s %s: %s\n", c == VALFRAC ? "--val-frac" : "--temperature",
                    optarg, c == VALFRAC ? "a fraction in [0, 1) is needed" : "a number >= 0");
                rc = -1;
            }
            *(c == VALFRAC ? &o->val_frac : &o->temperature) = v;
            break;
        }
        case BPE:
            rc = positive("--bpe", optarg, &o->bpe, say);
            if (rc == 0 && o->bpe > 4096) {
                SAY("mesh-train: --bpe %d: at most 4096 merges\n", o->bpe);
                rc = -1;
            }
            break;
        case VALEVERY:
            rc = positive("--val-every", optarg, &o->val_every, say);
            break;
        case VALBATCHES:
            rc = positive("--val-batches", optarg, &o->val_batches, say);
            break;
        case SAMPLE:
            rc = positive("--sample", optarg, &o->sample, say);
            break;
        case PROMPT:
            o->prompt = optarg;
            break;
        case SAMPLESEED:
            o->sample_seed = strtoull(optarg, NULL, 0);
            break;
        case HELP:
        case 'h':
            if (print)
                fputs(usage, stdout);
            return 1;
        default:
            if (print)
                fputs(usage, stderr);
            rc = -1;
        }
    }
    const char *moe_only = o->moe_layers               ? "--moe-layers"
                           : o->expert_ffn             ? "--expert-ffn"
                           : o->capacity > 0           ? "--capacity"
                           : o->capacity_groups        ? "--capacity-groups"
                           : o->size[MESH_AXIS_EP] > 1 ? "--mesh ep"
                                                       : NULL;
    if (rc == 0 && !o->experts && moe_only) {
        SAY("mesh-train: %s needs --experts\n", moe_only);
        rc = -1;
    }
    if (rc == 0 && !o->data && (o->sample || o->val_every)) {
        SAY("mesh-train: %s needs --data (the tokenizer and the validation tokens)\n",
            o->sample ? "--sample" : "--val-every");
        rc = -1;
    }
    if (rc == 0 && o->bpe && !o->data) {
        SAY("mesh-train: --bpe needs --data\n");
        rc = -1;
    }
    if (rc == 0 && o->data && o->vocab_given && o->vocab != TEXT_VOCAB + o->bpe) {
        SAY("mesh-train: --data with %d merges: --vocab is %d, not %d\n", o->bpe,
            TEXT_VOCAB + o->bpe, o->vocab);
        rc = -1;
    }
    if (o->data)
        o->vocab = TEXT_VOCAB + o->bpe;
    if (rc == 0 && o->sample && !o->prompt[0]) {
        SAY("mesh-train: --prompt: at least one byte is needed to sample from\n");
        rc = -1;
    }
    if (rc == 0 && o->capacity_groups && !(o->capacity > 0)) {
        SAY("mesh-train: --capacity-groups needs --capacity\n");
        rc = -1;
    }
    if (rc == 0 && o->experts && o->topk > o->experts) {
        SAY("mesh-train: --topk %d exceeds --experts %d\n", o->topk, o->experts);
        rc = -1;
    }
    /* all, or by default every other block (1, 3, 5, ...; block 0 of a one-block model):
     * the blocks there are; a list is checked against --layers by the model */
    uint64_t there = o->layers < 64 ? ((uint64_t)1 << o->layers) - 1 : ~(uint64_t)0;
    if (o->experts && (!o->moe_layers || o->moe_layers == ~(uint64_t)0))
        o->moe_layers = (o->moe_layers    ? ~(uint64_t)0
                         : o->layers == 1 ? 1
                                          : 0xaaaaaaaaaaaaaaaaull) &
                        there;
    if (rc == 0 && optind < argc) {
        SAY("mesh-train: unexpected argument '%s' (see --help)\n", argv[optind]);
        rc = -1;
    }
    return rc;
}
