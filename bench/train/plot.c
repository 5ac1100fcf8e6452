/* mesh-train's loss plot beside the CSV: gnuplot fed the points on its standard input, as
 * mesh-bench's plots. */
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void script(FILE *gp, const run_t *r, const char *png, const int64_t *steps,
                   const double *loss, const double *val, int n)
{
    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                "  set terminal pngcairo size 960,600 noenhanced font ',10'\n"
                "} else {\n"
                "  set terminal png size 960,600 noenhanced\n"
                "}\n");
    fprintf(gp, "set output '%s'\n", png);
    fprintf(gp, "set title \"mesh-train on %s: %d ranks, %d node%s\"\n", r->o.data,
            mesh_comm_size(r->world), mesh_comm_node_count(r->world),
            mesh_comm_node_count(r->world) == 1 ? "" : "s");
    fprintf(gp,
            "set xlabel 'step'\nset ylabel 'loss (nats per %s)'\nset grid\n"
            "set key top right box opaque\n",
            r->text.merges ? "token" : "byte");
    fprintf(gp,
            "plot '-' using 1:2 title 'train' with lines lw 2, "
            "'-' using 1:2 title 'validation' with linespoints lw 2 pt 7, "
            "%.9g title 'unigram entropy of the corpus' with lines dt 2 lw 2\n",
            r->unigram);
    for (int i = 0; i < n; i++)
        fprintf(gp, "%lld %.9g\n", (long long)steps[i], loss[i]);
    fprintf(gp, "e\n");
    for (int i = 0; i < n; i++)
        if (!isnan(val[i]))
            fprintf(gp, "%lld %.9g\n", (long long)steps[i], val[i]);
    fprintf(gp, "e\n");
}

int plot_losses(const run_t *r, const int64_t *steps, const double *loss, const double *val, int n)
{
    if (!r->say || !r->o.data || !r->o.csv || n < 1)
        return 0;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("# plot: gnuplot not found in PATH; no PNG written (install gnuplot-nox)\n");
        return 0;
    }
    char png[4096];
    size_t len = strlen(r->o.csv);
    if (len > 4 && !strcmp(r->o.csv + len - 4, ".csv"))
        snprintf(png, sizeof(png), "%.*s.png", (int)(len - 4), r->o.csv);
    else
        snprintf(png, sizeof(png), "%s.png", r->o.csv);
    if (strchr(png, '\'') || strchr(r->o.data, '"')) {
        fprintf(stderr, "mesh-train: no plot: quotes in %s or %s\n", png, r->o.data);
        return -1;
    }
    fflush(stdout);
    FILE *gp = popen("gnuplot", "w");
    if (!gp) {
        fprintf(stderr, "mesh-train: cannot start gnuplot: %m\n");
        return -1;
    }
    script(gp, r, png, steps, loss, val, n);
    int st = pclose(gp);
    if (st != 0) {
        fprintf(stderr, "mesh-train: gnuplot failed on %s (status %d)\n", png, st);
        return -1;
    }
    printf("# plot: %s\n", png);
    return 0;
}
