/*
 * What rank 0 keeps of the rows: the CSV file, the JSON file, and the out-of-place bus
 * bandwidths that become one gnuplot PNG per op (busbw against size on a log axis, one curve per
 * axis). gnuplot runs as a child process fed on its standard input; without it the plots are
 * skipped with a message and the rest of the run stands.
 */
#include "config.h"
#include "bench/bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char bench_csv_header[] = "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,"
                                "wrong,in_place,redop,axis,mem";

typedef struct {
    bench_op_t op;
    bench_dtype_t dtype;
    bench_redop_t redop;
    char axis[32];
    int size, groups, nnodes;
    size_t bytes;
    double busbw;
} bench_point_t;

struct bench_out {
    FILE *csv, *json;
    char mem[16]; /* the buffers' memory: host, or the device table (cuda, emu) */
    int json_rows;
    bench_point_t *points; /* out-of-place rows, kept for the plots */
    size_t npoints, cap;
};

static int bench_mkdirs(const char *dir);

/* The memory of the buffers measured: host, or the device table's name (cuda, emu). */
static const char *bench_mem_name(const bench_backend_t *b)
{
    return b->dev && b->dev->table ? b->dev->table : "host";
}

/* JSON string of text from our own names (no control characters); quotes and backslashes
 * escaped all the same. */
static void bench_json_str(FILE *f, const char *text)
{
    fputc('"', f);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', f);
        if ((unsigned char)*p >= 0x20)
            fputc(*p, f);
    }
    fputc('"', f);
}

bench_out_t *bench_out_open(const bench_opts_t *o, const bench_backend_t *b, int *err)
{
    bench_out_t *out;
    *err = 0;
    if (!o->csv && !o->json && !o->plot)
        return NULL;
    out = calloc(1, sizeof(*out));
    if (!out) {
        fprintf(stderr, "error: out of memory for the result files\n");
        *err = 1;
        return NULL;
    }
    snprintf(out->mem, sizeof(out->mem), "%s", bench_mem_name(b));
    /* before the run, so that a bad directory does not cost the measurements */
    if (o->plot && (strchr(o->plot, '\'') || bench_mkdirs(o->plot))) {
        fprintf(stderr, "error: --plot %s: cannot create the directory%s\n", o->plot,
                strchr(o->plot, '\'') ? " (a quote in its name)" : "");
        *err = 1;
    }
    if (o->csv) {
        out->csv = fopen(o->csv, "w");
        if (!out->csv) {
            fprintf(stderr, "error: cannot write %s: %m\n", o->csv);
            *err = 1;
        } else {
            fprintf(out->csv, "%s\n", bench_csv_header);
        }
    }
    if (o->json) {
        out->json = fopen(o->json, "w");
        if (!out->json) {
            fprintf(stderr, "error: cannot write %s: %m\n", o->json);
            *err = 1;
        } else {
            fprintf(out->json, "{\n  \"bench\": ");
            bench_json_str(out->json, b->name);
            fprintf(out->json, ",\n  \"nranks\": %d,\n  \"nodes\": %d,\n  \"mem\": ", b->size,
                    b->nnodes);
            bench_json_str(out->json, out->mem);
            fprintf(out->json, ",\n  \"mesh\": ");
            if (o->mesh)
                bench_json_str(out->json, o->mesh);
            else
                fprintf(out->json, "null");
            fprintf(out->json, ",\n  \"order\": ");
            bench_json_str(out->json, o->order ? o->order : o->mesh ? "tp-cp-ep-dp-pp" : "");
            fprintf(out->json, ",\n  \"iters\": %d,\n  \"warmup\": %d,\n  \"rows\": [", o->iters,
                    o->warmup);
        }
    }
    return out;
}

static void bench_keep_point(bench_out_t *out, const bench_axis_t *a, const bench_call_t *c,
                             const bench_sizes_t *sz, const bench_result_t *r)
{
    if (out->npoints == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 64;
        bench_point_t *p = realloc(out->points, cap * sizeof(*p));
        if (!p)
            return; /* a shorter curve; the tables and files are complete */
        out->points = p;
        out->cap = cap;
    }
    bench_point_t *p = &out->points[out->npoints++];
    *p = (bench_point_t){.op = c->op,
                         .dtype = c->dtype,
                         .redop = c->redop,
                         .size = a->size,
                         .groups = a->groups,
                         .nnodes = a->nnodes,
                         .bytes = sz->bytes,
                         .busbw = r->busbw};
    snprintf(p->axis, sizeof(p->axis), "%s", a->name);
}

void bench_out_row(bench_out_t *out, const bench_axis_t *a, const bench_call_t *c,
                   const bench_sizes_t *sz, const bench_result_t *r)
{
    const char *redop = bench_op_is_reduction(c->op) ? bench_redop_name(c->redop) : "none";
    if (!out || r->time_us < 0)
        return;
    if (out->csv)
        fprintf(out->csv, "%s,%d,%d,%zu,%s,%s,%.3f,%.4f,%.4f,%" PRId64 ",%d,%s,%s,%s\n",
                bench_op_name(c->op), a->size, a->nnodes, sz->bytes, bench_dtype_name(c->dtype),
                r->algo, r->time_us, r->algbw, r->busbw, r->wrong, c->in_place, redop, a->name,
                out->mem);
    if (out->json) {
        fprintf(out->json, "%s\n    {\"op\": \"%s\", \"axis\": ", out->json_rows++ ? "," : "",
                bench_op_name(c->op));
        bench_json_str(out->json, a->name);
        fprintf(out->json,
                ", \"nranks\": %d, \"groups\": %d, \"nodes\": %d, \"bytes\": %zu, "
                "\"dtype\": \"%s\", \"redop\": \"%s\", \"in_place\": %s, \"algo\": ",
                a->size, a->groups, a->nnodes, sz->bytes, bench_dtype_name(c->dtype), redop,
                c->in_place ? "true" : "false");
        bench_json_str(out->json, r->algo);
        fprintf(out->json,
                ", \"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, "
                "\"wrong\": %" PRId64 "}",
                r->time_us, r->algbw, r->busbw, r->wrong);
    }
    if (!c->in_place && sz->bytes > 0)
        bench_keep_point(out, a, c, sz, r);
}

/* Whether name is an executable file in a directory of PATH. */
static int bench_in_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len && len < sizeof(buf) - strlen(name) - 2) {
            snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, name);
            if (access(buf, X_OK) == 0)
                return 1;
        }
        path += len + (path[len] == ':');
    }
    return 0;
}

/* mkdir -p */
static int bench_mkdirs(const char *dir)
{
    char buf[4096];
    if (strlen(dir) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char keep = *p;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST)
            return -1;
        *p = keep;
        if (!keep)
            break;
    }
    return 0;
}

static int bench_same_curve(const bench_point_t *x, const bench_point_t *y)
{
    return strcmp(x->axis, y->axis) == 0 && x->dtype == y->dtype && x->redop == y->redop;
}

/* Whether point i of op starts a curve: no earlier point of op belongs to the same one. */
static int bench_curve_starts(const bench_out_t *out, bench_op_t op, size_t i)
{
    if (out->points[i].op != op)
        return 0;
    for (size_t j = 0; j < i; j++)
        if (out->points[j].op == op && bench_same_curve(&out->points[i], &out->points[j]))
            return 0;
    return 1;
}

/* The gnuplot script of one op: points of each curve inline, in the order they ran. */
static void bench_plot_script(FILE *gp, const bench_out_t *out, const bench_opts_t *o,
                              const bench_backend_t *b, bench_op_t op, const char *png)
{
    int many_types = (o->dtypes & (o->dtypes - 1)) != 0;
    int many_redops = bench_op_is_reduction(op) && (o->redops & (o->redops - 1)) != 0;
    int ncurves = 0;

    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                "  set terminal pngcairo size 960,600 noenhanced font ',10'\n"
                "} else {\n"
                "  set terminal png size 960,600 noenhanced\n"
                "}\n");
    fprintf(gp, "set output '%s'\n", png);
    fprintf(gp, "set title \"%s: bus bandwidth per axis\\n", bench_op_name(op));
    if (b->mesh)
        fprintf(gp, "mesh %s; ", b->mesh);
    fprintf(gp, "%d ranks on %d node%s, %s%s buffers\"\n", b->size, b->nnodes,
            b->nnodes == 1 ? "" : "s", bench_mem_name(b), b->dev ? " device" : "");
    fprintf(gp, "set logscale x 2\nset format x '%%.0b%%BB'\nset xlabel 'message size S (bytes)'\n"
                "set ylabel 'busbw (GB/s), out of place'\nset yrange [0:*]\nset grid\n"
                "set key top left box opaque\nset style data linespoints\n");
    /* one curve per axis (and per type and redop when several were run) */
    for (size_t i = 0; i < out->npoints; i++) {
        const bench_point_t *p = &out->points[i];
        if (!bench_curve_starts(out, op, i))
            continue;
        fprintf(gp,
                "%s'-' using 1:2 title '%s: %d group%s of %d, %d node%s each%s%s%s%s' lw 2 pt 7",
                ncurves++ ? ", " : "plot ", p->axis, p->groups, p->groups == 1 ? "" : "s", p->size,
                p->nnodes, p->nnodes == 1 ? "" : "s", many_types ? ", " : "",
                many_types ? bench_dtype_name(p->dtype) : "", many_redops ? ", " : "",
                many_redops ? bench_redop_name(p->redop) : "");
    }
    fprintf(gp, "\n");
    for (size_t i = 0; i < out->npoints; i++) {
        const bench_point_t *p = &out->points[i];
        if (!bench_curve_starts(out, op, i))
            continue;
        for (size_t k = i; k < out->npoints; k++)
            if (out->points[k].op == op && bench_same_curve(p, &out->points[k]))
                fprintf(gp, "%zu %.6f\n", out->points[k].bytes, out->points[k].busbw);
        fprintf(gp, "e\n");
    }
}

/* Without gnuplot: each op's script as DIR/op.gp, drawing op.png where it is run (a machine
 * without gnuplot, such as a lent GPU machine, leaves the drawing to another). */
static int bench_plot_scripts(const bench_out_t *out, const bench_opts_t *o,
                              const bench_backend_t *b)
{
    char path[4096], png[64];
    int n = 0;
    for (int op = 0; op < BENCH_OP_COUNT; op++) {
        size_t i;
        for (i = 0; i < out->npoints && out->points[i].op != (bench_op_t)op; i++)
            ;
        if (i == out->npoints)
            continue;
        snprintf(path, sizeof(path), "%s/%s.gp", o->plot, bench_op_name((bench_op_t)op));
        snprintf(png, sizeof(png), "%s.png", bench_op_name((bench_op_t)op));
        FILE *f = fopen(path, "w");
        if (f)
            bench_plot_script(f, out, o, b, (bench_op_t)op, png);
        if (!f || fclose(f)) {
            fprintf(stderr, "error: cannot write %s: %m\n", path);
            return -1;
        }
        n++;
    }
    printf("# plots: gnuplot not found in PATH; no PNG written (install gnuplot-nox); %d gnuplot "
           "script%s in %s (cd there; gnuplot OP.gp draws OP.png)\n",
           n, n == 1 ? "" : "s", o->plot);
    return 0;
}

static int bench_plot(const bench_out_t *out, const bench_opts_t *o, const bench_backend_t *b)
{
    char png[4096];
    int rc = 0;

    if (strchr(o->plot, '\'') || bench_mkdirs(o->plot))
        return -1; /* said at the start */
    if (!bench_in_path("gnuplot"))
        return bench_plot_scripts(out, o, b);
    for (int op = 0; op < BENCH_OP_COUNT; op++) {
        size_t i;
        for (i = 0; i < out->npoints && out->points[i].op != (bench_op_t)op; i++)
            ;
        if (i == out->npoints)
            continue;
        snprintf(png, sizeof(png), "%s/%s.png", o->plot, bench_op_name((bench_op_t)op));
        fflush(stdout);
        FILE *gp = popen("gnuplot", "w");
        if (!gp) {
            fprintf(stderr, "error: cannot start gnuplot: %m\n");
            return -1;
        }
        bench_plot_script(gp, out, o, b, (bench_op_t)op, png);
        int st = pclose(gp);
        if (st != 0) {
            fprintf(stderr, "error: gnuplot failed on %s (status %d)\n", png, st);
            rc = -1;
        } else {
            printf("# plot: %s\n", png);
        }
    }
    return rc;
}

int bench_out_close(bench_out_t *out, const bench_opts_t *o, const bench_backend_t *b)
{
    int rc = 0;
    if (!out)
        return 0;
    if (out->csv && fclose(out->csv)) {
        fprintf(stderr, "error: cannot write %s: %m\n", o->csv);
        rc = -1;
    }
    if (out->json) {
        fprintf(out->json, "\n  ]\n}\n");
        if (fclose(out->json)) {
            fprintf(stderr, "error: cannot write %s: %m\n", o->json);
            rc = -1;
        }
    }
    if (o->plot && bench_plot(out, o, b))
        rc = -1;
    fflush(stdout);
    free(out->points);
    free(out);
    return rc;
}
