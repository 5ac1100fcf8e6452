/*
 * mesh-info --pp SCHEDULE --stages P --microbatches M [--chunks V] [--group G]
 *           [--costs F,B,W[,C]] [--plot FILE.png]
 * Builds a pipeline schedule, runs the static checker on it and prints the predicted timeline
 * (one row per stage), the bubble fraction and the peak of stored activations; --plot draws the
 * timeline with gnuplot.
 */
#include "tools/mesh-info-pp.h"
#include <mesh/pipeline.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char pp_usage[] =
    "usage: mesh-info --pp SCHEDULE --stages P --microbatches M [--chunks V] [--group G]\n"
    "                 [--costs F,B,W[,C]] [--plot FILE.png]\n"
    "  --pp SCHEDULE      afab (gpipe), 1f1b, interleaved, zb1 (zbh1) or zbv\n"
    "  --stages P         pipeline ranks\n"
    "  --microbatches M   micro-batches per step\n"
    "  --chunks V         model chunks per rank (interleaved: default 2; zbv: 2)\n"
    "  --group G          interleaved: micro-batches per chunk before the next (default P)\n"
    "  --costs F,B,W[,C]  time of a forward, input-gradient backward and weight-gradient\n"
    "                     action of one chunk, and of a message (default 1,1,1,0); schedules\n"
    "                     that do not split the backward pay B+W per backward\n"
    "  --plot FILE.png    draw the timeline with gnuplot\n";

int mesh_info_pp_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--pp") == 0 || strncmp(argv[i], "--pp=", 5) == 0)
            return 1;
    return 0;
}

typedef struct {
    mesh_pp_schedule_params_t prm;
    mesh_pp_costs_t costs;
    const char *plot;
} pp_opts_t;

static int pp_int(const char *opt, const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1000000) {
        fprintf(stderr, "mesh-info: %s expects a positive number; got '%s'\n", opt, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int pp_costs(const char *s, mesh_pp_costs_t *c)
{
    double v[4] = {1, 1, 1, 0};
    int n = 0, ok = 0;
    for (const char *p = s; n < 4;) {
        char *end;
        v[n] = strtod(p, &end);
        if (end == p || !(v[n] >= 0) || isinf(v[n]) || (*end && *end != ','))
            break;
        n++;
        if (!*end) {
            ok = n >= 3;
            break;
        }
        p = end + 1;
    }
    if (!ok) {
        fprintf(stderr, "mesh-info: --costs expects F,B,W or F,B,W,C, numbers >= 0; got '%s'\n", s);
        return -1;
    }
    *c = (mesh_pp_costs_t){.field_mask = MESH_PP_COSTS_FIELD_F | MESH_PP_COSTS_FIELD_B |
                                         MESH_PP_COSTS_FIELD_W | MESH_PP_COSTS_FIELD_COMM,
                           .f = v[0],
                           .b = v[1],
                           .w = v[2],
                           .comm = v[3]};
    return 0;
}

static int pp_parse(int argc, char **argv, pp_opts_t *o)
{
    static const struct option longopts[] = {{"pp", required_argument, NULL, 'p'},
                                             {"stages", required_argument, NULL, 's'},
                                             {"microbatches", required_argument, NULL, 'm'},
                                             {"chunks", required_argument, NULL, 'v'},
                                             {"group", required_argument, NULL, 'g'},
                                             {"costs", required_argument, NULL, 'c'},
                                             {"plot", required_argument, NULL, 'P'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c, rc = 0;
    optind = 1;
    o->costs = (mesh_pp_costs_t){.field_mask = 0};
    while (rc == 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (mesh_pp_kind_parse(optarg, &o->prm.kind) != MESH_OK ||
                o->prm.kind == MESH_PP_USER) {
                fprintf(stderr, "mesh-info: --pp: unknown schedule '%s'\n%s", optarg, pp_usage);
                return 2;
            }
            break;
        case 's':
            rc = pp_int("--stages", optarg, &o->prm.stages);
            break;
        case 'm':
            rc = pp_int("--microbatches", optarg, &o->prm.microbatches);
            break;
        case 'v':
            rc = pp_int("--chunks", optarg, &o->prm.chunks);
            o->prm.field_mask |= MESH_PP_SCHED_FIELD_CHUNKS;
            break;
        case 'g':
            rc = pp_int("--group", optarg, &o->prm.group);
            o->prm.field_mask |= MESH_PP_SCHED_FIELD_GROUP;
            break;
        case 'c':
            rc = pp_costs(optarg, &o->costs);
            break;
        case 'P':
            o->plot = optarg;
            break;
        case 'h':
            fputs(pp_usage, stdout);
            return 1;
        default:
            fputs(pp_usage, stderr);
            return 2;
        }
    }
    if (rc)
        return 2;
    if (optind < argc) {
        fprintf(stderr, "mesh-info: unexpected argument '%s'\n%s", argv[optind], pp_usage);
        return 2;
    }
    if (o->prm.stages == 0 || o->prm.microbatches == 0) {
        fprintf(stderr, "mesh-info: --pp needs --stages and --microbatches\n%s", pp_usage);
        return 2;
    }
    return 0;
}

/* "F3" or, with chunks, "F3:1". */
static int pp_label(const mesh_pp_action_t *a, int v, char *buf, size_t len)
{
    if (v > 1)
        return snprintf(buf, len, "%s%d:%d", mesh_pp_op_name(a->op), a->mb, a->chunk);
    return snprintf(buf, len, "%s%d", mesh_pp_op_name(a->op), a->mb);
}

static void pp_timeline(mesh_pp_schedule_h s, double slot, double makespan)
{
    int p = mesh_pp_schedule_stages(s), v = mesh_pp_schedule_chunks(s);
    int cols = (int)lround(makespan / slot), width = 0;
    char lab[32];
    for (int r = 0; r < p; r++)
        for (int i = 0; i < mesh_pp_schedule_length(s, r); i++) {
            mesh_pp_action_t a;
            mesh_pp_schedule_action(s, r, i, &a);
            int n = pp_label(&a, v, lab, sizeof(lab));
            if (a.op <= MESH_PP_W && n > width)
                width = n;
        }
    char *row = malloc((size_t)cols * (size_t)(width + 1) + 1);
    if (row == NULL)
        return;
    for (int r = 0; r < p; r++) {
        for (int k = 0; k < cols; k++)
            snprintf(row + (size_t)k * (width + 1), (size_t)width + 2, "%-*s ", width, "..");
        for (int i = 0; i < mesh_pp_schedule_length(s, r); i++) {
            mesh_pp_action_t a;
            double t0, t1;
            mesh_pp_schedule_action(s, r, i, &a);
            if (a.op > MESH_PP_W)
                continue;
            mesh_pp_check_time(s, r, i, &t0, &t1);
            int k0 = (int)lround(t0 / slot), k1 = (int)lround(t1 / slot);
            pp_label(&a, v, lab, sizeof(lab));
            for (int k = k0; k < k1 && k < cols; k++)
                memcpy(row + (size_t)k * (width + 1), k == k0 ? lab : "--",
                       k == k0 ? strlen(lab) : 2);
            for (int k = k0; k < k1 && k < cols; k++) /* pad what the label did not cover */
                for (int j = k == k0 ? (int)strlen(lab) : 2; j < width; j++)
                    row[(size_t)k * (width + 1) + (size_t)j] = ' ';
        }
        /* idle columns at the end stay: the row ends where the step ends */
        size_t len = strlen(row);
        while (len > 0 && row[len - 1] == ' ')
            row[--len] = '\0';
        printf("rank %-3d|%s\n", r, row);
    }
    free(row);
}

static int pp_plot(mesh_pp_schedule_h s, const char *png, const mesh_pp_report_t *rep, double slot)
{
    static const char *const colour[3] = {"#4c72b0", "#55a868", "#dd8452"}; /* F, B, W */
    int p = mesh_pp_schedule_stages(s), v = mesh_pp_schedule_chunks(s);
    if (strchr(png, '\'')) {
        fprintf(stderr, "mesh-info: --plot: the file name must not contain a quote\n");
        return 1;
    }
    fflush(stdout);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("# plot: gnuplot not found in PATH; no PNG written (install gnuplot-nox)\n");
        return 0;
    }
    FILE *gp = popen("gnuplot", "w");
    if (gp == NULL) {
        fprintf(stderr, "mesh-info: cannot start gnuplot: %m\n");
        return 1;
    }
    /* wide enough for a label in every column of the timeline */
    double cols = rep->makespan / slot;
    int width = cols * 34 < 900 ? 900 : cols * 34 > 8000 ? 8000 : (int)(cols * 34);
    fprintf(gp,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %d,%d noenhanced font ',8'\n"
            "} else {\n"
            "  set terminal png size %d,%d noenhanced\n"
            "}\n",
            width, 120 + 40 * p, width, 120 + 40 * p);
    fprintf(gp, "set output '%s'\n", png);
    fprintf(gp,
            "set title \"%s: %d stages, %d micro-batches, %d chunk%s per stage; bubble %.4f, "
            "peak %d activations\"\n",
            mesh_pp_kind_name(mesh_pp_schedule_kind(s)), p, mesh_pp_schedule_microbatches(s), v,
            v == 1 ? "" : "s", rep->bubble, rep->peak_activations);
    fprintf(gp,
            "set xrange [0:%g]\nset yrange [%g:-0.6]\nset ytics 1\nset xlabel 'time'\n"
            "set ylabel 'rank'\nunset key\n",
            rep->makespan, p - 0.4);
    int obj = 1;
    for (int r = 0; r < p; r++)
        for (int i = 0; i < mesh_pp_schedule_length(s, r); i++) {
            mesh_pp_action_t a;
            double t0, t1;
            char lab[32];
            mesh_pp_schedule_action(s, r, i, &a);
            if (a.op > MESH_PP_W)
                continue;
            mesh_pp_check_time(s, r, i, &t0, &t1);
            if (t1 <= t0)
                continue;
            fprintf(gp,
                    "set object %d rect from %g,%g to %g,%g fc rgb '%s' fs solid 0.85 "
                    "border lc rgb 'white'\n",
                    obj++, t0, r - 0.4, t1, r + 0.4, colour[a.op]);
            pp_label(&a, v, lab, sizeof(lab));
            fprintf(gp, "set label '%s' at %g,%d center front tc rgb 'white'\n", lab, (t0 + t1) / 2,
                    r);
        }
    fprintf(gp, "plot NaN notitle\n");
    int st = pclose(gp);
    if (st != 0) {
        fprintf(stderr, "mesh-info: gnuplot failed on %s (status %d)\n", png, st);
        return 1;
    }
    printf("# plot: %s\n", png);
    return 0;
}

int mesh_info_pp(int argc, char **argv)
{
    pp_opts_t o = {.prm = {.kind = MESH_PP_1F1B}};
    int rc = pp_parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    mesh_pp_schedule_h s;
    mesh_pp_report_t rep;
    if (mesh_pp_schedule_create(&o.prm, &s) != MESH_OK) {
        fprintf(stderr, "mesh-info: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    if (mesh_pp_check(s, &o.costs, &rep) != MESH_OK) {
        fprintf(stderr, "mesh-info: %s\n", mesh_comm_last_error(NULL));
        mesh_pp_schedule_destroy(s);
        return 1;
    }
    mesh_pp_costs_t c = {.f = 1, .b = 1, .w = 1, .comm = 0};
    if (o.costs.field_mask)
        c = o.costs;
    int p = mesh_pp_schedule_stages(s), m = mesh_pp_schedule_microbatches(s);
    int v = mesh_pp_schedule_chunks(s);
    double beff = rep.split_backward ? c.b : c.b + c.w, slot = 0;
    double all[3] = {c.f, beff, rep.split_backward ? c.w : 0};
    for (int i = 0; i < 3; i++)
        if (all[i] > 0 && (slot == 0 || all[i] < slot))
            slot = all[i];
    if (slot == 0)
        slot = 1;

    printf("# %s: %d stages, %d micro-batches, %d chunk%s per stage (%d model stages)\n",
           mesh_pp_kind_name(mesh_pp_schedule_kind(s)), p, m, v, v == 1 ? "" : "s", p * v);
    printf("# costs per action of a chunk: F %g, B %g, W %g, message %g%s\n", c.f, c.b, c.w, c.comm,
           rep.split_backward ? "" : "; no W actions: each B pays B+W");
    printf("# one column = %g; F forward, B backward, W weight gradient, then micro-batch%s; "
           "-- continues, .. idle\n",
           slot, v > 1 ? ":chunk" : "");
    pp_timeline(s, slot, rep.makespan);
    printf("makespan %g, bubble %.4f", rep.makespan, rep.bubble);
    mesh_pp_kind_t k = mesh_pp_schedule_kind(s);
    if ((k == MESH_PP_AFAB || k == MESH_PP_1F1B) && c.comm == 0)
        printf(" ((p-1)/(m+p-1) = %.4f)", (double)(p - 1) / (m + p - 1));
    if (k == MESH_PP_INTERLEAVED && c.comm == 0)
        printf(" ((p-1)/(vm+p-1) = %.4f)", (double)(p - 1) / (v * m + p - 1));
    printf("\nrank  bubble  stored activations (peak)\n");
    for (int r = 0; r < p; r++) {
        double b;
        int pk;
        mesh_pp_check_rank(s, r, &b, &pk);
        printf("%-5d %.4f  %d\n", r, b, pk);
    }
    printf("peak stored activations: %d on rank %d (an activation is stored from its F until its "
           "%s)\n",
           rep.peak_activations, rep.peak_rank, rep.split_backward ? "W" : "B");
    rc = o.plot ? pp_plot(s, o.plot, &rep, slot) : 0;
    mesh_pp_schedule_destroy(s);
    return rc;
}
