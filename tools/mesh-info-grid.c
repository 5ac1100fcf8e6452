/*
 * mesh-info --grid tp=2,pp=2,dp=2 [--order O] [--world N] [--ranks-per-node K]
 *           [--placement block|cyclic] [--reorder] [--intra tp,cp,ep] [--json]
 * Lays the grid over a node map built from the options (the way meshrun places ranks) and prints
 * the groups of every axis and combination, in world ranks, and whether the intra-node axes fit.
 */
#include "tools/mesh-info-grid.h"
#include "libmesh/grid_layout.h"
#include "libmesh/log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char grid_usage[] =
    "usage: mesh-info --grid tp=T,cp=C,ep=E,dp=D,pp=P[,etp=X] [--order O] [--world N]\n"
    "                 [--ranks-per-node K] [--placement block|cyclic] [--reorder]\n"
    "                 [--intra cp,ep] [--json]\n"
    "  --grid SIZES           axis sizes (unset axes are 1); etp sets the expert tensor size\n"
    "  --order O              axes innermost first (default tp-cp-ep-dp-pp)\n"
    "  --world N              number of ranks (default: the product of the sizes)\n"
    "  --ranks-per-node K     ranks per simulated node (default: all on one node)\n"
    "  --placement P          block: consecutive ranks share a node (default); cyclic: rank r\n"
    "                         on node r % nodes, as meshrun --placement cyclic\n"
    "  --reorder              renumber ranks node by node first (MESH_GRID_REORDER)\n"
    "  --intra AXES           axes besides tp that must stay inside a node (cp, ep, ...)\n"
    "  --json                 one JSON object: sizes, nodes, \"axes\": groups, \"fits\"\n";

typedef struct {
    mesh_grid_params_t p;
    int world, per_node, cyclic, json;
    char order[64];
} grid_opts_t;

int mesh_info_grid_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--grid") == 0 || strncmp(argv[i], "--grid=", 7) == 0)
            return 1;
    return 0;
}

static int grid_axis_of(const char *s, size_t len)
{
    for (int id = 0; id < MESH_GRID_AXIS_IDS; id++)
        if (strlen(mesh_grid_axis_name(id)) == len && strncmp(mesh_grid_axis_name(id), s, len) == 0)
            return id;
    return -1;
}

/* "tp=2,pp=2,dp=2": sizes by axis, etp as expert_tp. */
static int grid_parse_sizes(const char *spec, mesh_grid_params_t *p)
{
    for (const char *s = spec; *s;) {
        size_t len = strcspn(s, "=,");
        int id = grid_axis_of(s, len);
        char *end;
        if (s[len] != '=' || id < 0 || id == MESH_GRID_AXIS_EDP) {
            fprintf(stderr,
                    "mesh-info: --grid expects AXIS=SIZE,... with axes tp, cp, ep, dp, pp "
                    "and etp; got '%.*s'\n",
                    (int)len, s);
            return -1;
        }
        long v = strtol(s + len + 1, &end, 10);
        if (end == s + len + 1 || (*end && *end != ',') || v < -1000000 || v > 1000000) {
            fprintf(stderr, "mesh-info: --grid: size of %s is not a number\n",
                    mesh_grid_axis_name(id));
            return -1;
        }
        if (id == MESH_GRID_AXIS_ETP) {
            p->field_mask |= MESH_GRID_PARAM_FIELD_EXPERT_TP;
            p->expert_tp = (int)v;
        } else {
            p->size[id] = (int)v;
        }
        s = *end ? end + 1 : end;
    }
    return 0;
}

static int grid_parse_intra(const char *list, unsigned *intra)
{
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        int id = grid_axis_of(s, len);
        if (id < 0 || id >= MESH_AXIS_COUNT) {
            fprintf(stderr, "mesh-info: --intra: unknown axis '%.*s'\n", (int)len, s);
            return -1;
        }
        *intra |= 1u << id;
        s += len + (s[len] == ',');
    }
    return 0;
}

static int grid_parse(int argc, char **argv, grid_opts_t *o)
{
    static const struct option longopts[] = {{"grid", required_argument, NULL, 'g'},
                                             {"order", required_argument, NULL, 'o'},
                                             {"world", required_argument, NULL, 'w'},
                                             {"ranks-per-node", required_argument, NULL, 'k'},
                                             {"placement", required_argument, NULL, 'p'},
                                             {"reorder", no_argument, NULL, 'r'},
                                             {"intra", required_argument, NULL, 'i'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    o->p.field_mask = MESH_GRID_PARAM_FIELD_SIZES | MESH_GRID_PARAM_FIELD_FLAGS |
                      MESH_GRID_PARAM_FIELD_INTRA_NODE;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'g':
            /* mesh-info --grid --help, as mesh-info's usage shows it */
            if (strcmp(optarg, "--help") == 0 || strcmp(optarg, "-h") == 0) {
                fputs(grid_usage, stdout);
                exit(0);
            }
            if (grid_parse_sizes(optarg, &o->p) != 0)
                return -1;
            break;
        case 'o':
            snprintf(o->order, sizeof(o->order), "%s", optarg);
            o->p.field_mask |= MESH_GRID_PARAM_FIELD_ORDER;
            o->p.order = o->order;
            break;
        case 'w':
            o->world = atoi(optarg);
            break;
        case 'k':
            o->per_node = atoi(optarg);
            break;
        case 'p':
            if (strcmp(optarg, "block") != 0 && strcmp(optarg, "cyclic") != 0) {
                fprintf(stderr, "mesh-info: --placement expects block or cyclic, got '%s'\n",
                        optarg);
                return -1;
            }
            o->cyclic = strcmp(optarg, "cyclic") == 0;
            break;
        case 'r':
            o->p.flags |= MESH_GRID_REORDER;
            break;
        case 'i':
            if (grid_parse_intra(optarg, &o->p.intra_node) != 0)
                return -1;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            fputs(grid_usage, stdout);
            exit(0);
        default:
            fputs(grid_usage, stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mesh-info: unexpected argument '%s'\n%s", argv[optind], grid_usage);
        return -1;
    }
    if (o->world == 0) {
        long long w = 1;
        for (int id = 0; id < MESH_AXIS_COUNT && w < 1000000; id++)
            w *= o->p.size[id] > 0 ? o->p.size[id] : 1;
        o->world = (int)w;
    }
    if (o->world < 1 || o->world > 1000000) {
        fprintf(stderr, "mesh-info: --world %d is out of range 1..1000000\n", o->world);
        return -1;
    }
    if (o->per_node == 0)
        o->per_node = o->world;
    if (o->per_node < 1) {
        fprintf(stderr, "mesh-info: --ranks-per-node %d is not positive\n", o->per_node);
        return -1;
    }
    return 0;
}

/* Names mesh_grid_comm accepts, in a stable order: each axis, then combinations of the axes of
 * size > 1; kind and mask of each. */
typedef struct {
    mesh_grid_kind_t kind;
    unsigned mask;
    char name[40];
} grid_name_t;

static int grid_names(const mesh_grid_layout_t *l, grid_name_t *out)
{
    mesh_grid_axis_t ax[MESH_GRID_MAX_AXES];
    int n = mesh_grid_layout_axes(l, ax);
    for (int i = 0; i < n; i++) {
        out[i].kind = ax[i].kind;
        out[i].mask = MESH_GRID_BIT(ax[i].id);
        snprintf(out[i].name, sizeof(out[i].name), "%s", mesh_grid_axis_name(ax[i].id));
    }
    for (int kind = 0; kind < MESH_GRID_KINDS; kind++) {
        if (kind == MESH_GRID_EXPERT && !l->expert_ok)
            continue;
        unsigned all = mesh_grid_layout_nontrivial(l, (mesh_grid_kind_t)kind, ~0u);
        for (unsigned m = 1; m <= all; m++) {
            if ((m & all) != m || __builtin_popcount(m) < 2)
                continue;
            char name[40];
            mesh_grid_kind_t k;
            unsigned mask;
            mesh_grid_layout_mask_name(l, (mesh_grid_kind_t)kind, m, name, sizeof(name));
            /* listed once, under the grid the name resolves to */
            if (mesh_grid_parse_axes("mesh-info", name, &k, &mask) != MESH_OK || (int)k != kind)
                continue;
            out[n].kind = (mesh_grid_kind_t)kind;
            out[n].mask = m;
            snprintf(out[n].name, sizeof(out[n].name), "%s", name);
            n++;
        }
    }
    return n;
}

static void grid_print_groups(const mesh_grid_layout_t *l, const grid_name_t *nm, int *granks,
                              int json)
{
    int ngroups, gs;
    mesh_grid_layout_shape(l, nm->kind, nm->mask, &ngroups, &gs);
    printf(json ? "[" : "");
    for (int g = 0; g < ngroups; g++) {
        mesh_grid_layout_group(l, nm->kind, nm->mask, g, granks);
        printf(json ? "%s[" : "%s[", g ? (json ? "," : " ") : "");
        for (int i = 0; i < gs; i++)
            printf("%s%d", i ? "," : "", l->world_of[granks[i]]);
        printf("]");
    }
    printf(json ? "]" : "\n");
}

static void grid_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void grid_report(const grid_opts_t *o, const mesh_grid_layout_t *l, const int *node_sizes,
                        int nnodes, int fits, const char *why)
{
    grid_name_t *names = malloc(sizeof(grid_name_t) * 64);
    int *granks = malloc(sizeof(int) * (size_t)l->world);
    int n = names && granks ? grid_names(l, names) : 0;
    char order[64], eorder[64];
    mesh_grid_layout_mask_name(l, MESH_GRID_DENSE, ~0u, order, sizeof(order));
    mesh_grid_layout_mask_name(l, MESH_GRID_EXPERT, ~0u, eorder, sizeof(eorder));
    if (o->json) {
        printf("{\"world\": %d, \"sizes\": {", l->world);
        for (int id = 0; id < MESH_GRID_AXIS_IDS; id++)
            printf("%s\"%s\": %d", id ? ", " : "", mesh_grid_axis_name(id), l->size[id]);
        printf("}, \"order\": \"%s\", \"expert_order\": \"%s\", \"expert\": %s, \"nodes\": [",
               order, eorder, l->expert_ok ? "true" : "false");
        for (int k = 0; k < nnodes; k++)
            printf("%s%d", k ? ", " : "", node_sizes[k]);
        printf("], \"placement\": \"%s\", \"reordered\": %s, \"fits\": %s",
               o->cyclic ? "cyclic" : "block", l->reordered ? "true" : "false",
               fits ? "true" : "false");
        if (why) {
            printf(", \"error\": ");
            grid_json_string(why);
        }
        printf(", \"axes\": {");
        for (int i = 0; i < n; i++) {
            printf("%s\"%s\": ", i ? ", " : "", names[i].name);
            grid_print_groups(l, &names[i], granks, 1);
        }
        printf("}}\n");
    } else {
        printf("grid of %d ranks: tp=%d cp=%d ep=%d dp=%d pp=%d, order %s (laid out as %s)\n",
               l->world, l->size[0], l->size[1], l->size[2], l->size[3], l->size[4],
               o->p.order ? o->p.order : "tp-cp-ep-dp-pp", order);
        if (l->expert_ok)
            printf("expert grid: etp=%d ep=%d edp=%d pp=%d, order %s\n",
                   l->size[MESH_GRID_AXIS_ETP], l->size[MESH_AXIS_EP], l->size[MESH_GRID_AXIS_EDP],
                   l->size[MESH_AXIS_PP], eorder);
        else
            printf("expert grid: none (%s)\n", l->expert_why);
        printf("nodes: %d (", nnodes);
        for (int k = 0; k < nnodes; k++)
            printf("%s%d", k ? "," : "", node_sizes[k]);
        printf(" ranks), %s placement%s\n", o->cyclic ? "cyclic" : "block",
               l->reordered ? ", renumbered node by node" : "");
        printf("fits: %s%s%s\n", fits ? "yes" : "no", why ? ": " : "", why ? why : "");
        printf("groups, in world ranks:\n");
        for (int i = 0; i < n; i++) {
            printf("  %-14s ", names[i].name);
            grid_print_groups(l, &names[i], granks, 0);
        }
    }
    free(names);
    free(granks);
}

int mesh_info_grid(int argc, char **argv)
{
    grid_opts_t o = {0};
    mesh_grid_layout_t l;
    if (grid_parse(argc, argv, &o) != 0)
        return 2;

    if (mesh_grid_layout_init(&l, o.world, &o.p) != MESH_OK) {
        const char *why = mesh_error_last();
        if (o.json) {
            printf("{\"world\": %d, \"fits\": false, \"error\": ", o.world);
            grid_json_string(why);
            printf("}\n");
        }
        fprintf(stderr, "mesh-info: %s\n", why);
        return 1;
    }
    int nnodes = (o.world + o.per_node - 1) / o.per_node;
    int *node_of = malloc(sizeof(int) * (size_t)o.world);
    int *node_sizes = calloc((size_t)nnodes, sizeof(int));
    if (node_of == NULL || node_sizes == NULL) {
        fprintf(stderr, "mesh-info: out of memory\n");
        return 1;
    }
    for (int r = 0; r < o.world; r++) {
        node_of[r] = o.cyclic ? r % nnodes : r / o.per_node;
        node_sizes[node_of[r]]++;
    }
    mesh_status_t st = mesh_grid_layout_place(&l, node_of, NULL);
    char why[512];
    snprintf(why, sizeof(why), "%s", mesh_error_last());
    grid_report(&o, &l, node_sizes, nnodes, st == MESH_OK, st == MESH_OK ? NULL : why);
    if (st != MESH_OK)
        fprintf(stderr, "mesh-info: %s\n", why);
    mesh_grid_layout_free(&l);
    free(node_of);
    free(node_sizes);
    return st == MESH_OK ? 0 : 1;
}
