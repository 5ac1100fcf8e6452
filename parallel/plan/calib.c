/*
 * Calibration from mesh-bench's per-axis CSV: each (axis, op, group size, nodes) keeps its
 * measured curve (median time per size) and an alpha-beta fit weighted by relative error, so
 * that a prediction inside the measured sizes interpolates between neighbours (each segment
 * is its own latency and bandwidth) and one outside follows the fit from the nearest point.
 */
#include "planner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mesh_plan_calib_entry_t e;
    double *bytes, *t; /* sorted by bytes, seconds */
} plan_centry_t;

struct mesh_plan_calib {
    plan_centry_t *ent;
    int n;
};

typedef struct {
    char axis[32];
    char mem[16];
    mesh_plan_op_t op;
    int nranks, nodes, in_place;
    double bytes, t;
} plan_row_t;

static const char *const plan_op_names[MESH_PLAN_OP_COUNT] = {
    "allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv"};

const char *mesh_plan_op_name(mesh_plan_op_t op)
{
    return op >= 0 && op < MESH_PLAN_OP_COUNT ? plan_op_names[op] : "unknown";
}

static int plan_op_of(const char *s, size_t len)
{
    for (int i = 0; i < MESH_PLAN_OP_COUNT; i++)
        if (strlen(plan_op_names[i]) == len && strncmp(plan_op_names[i], s, len) == 0)
            return i;
    return -1;
}

/* Column indexes of the header line; -1 for a missing one. */
enum { C_OP, C_NRANKS, C_NODES, C_BYTES, C_TIME, C_INPLACE, C_AXIS, C_MEM, C_COUNT };
static const char *const plan_cols[C_COUNT] = {"op",      "nranks",   "nodes", "bytes",
                                               "time_us", "in_place", "axis",  "mem"};

static int plan_header(const char *line, size_t len, int *col)
{
    int k = 0;
    for (int i = 0; i < C_COUNT; i++)
        col[i] = -1;
    for (size_t pos = 0; pos <= len; k++) {
        size_t w = strcspn(line + pos, ",\r\n");
        if (pos + w > len)
            w = len - pos;
        for (int i = 0; i < C_COUNT; i++)
            if (strlen(plan_cols[i]) == w && strncmp(line + pos, plan_cols[i], w) == 0)
                col[i] = k;
        pos += w + 1;
    }
    for (int i = 0; i < C_COUNT; i++)
        if (col[i] < 0 && i != C_AXIS && i != C_INPLACE && i != C_NODES && i != C_MEM)
            return -1;
    return 0;
}

/* Fits t = alpha + beta S minimising the relative errors; alpha >= 0 and beta > 0. */
static void plan_fit(const double *S, const double *t, int n, double *alpha, double *beta)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double w = 1.0 / (t[i] * t[i]);
        sw += w, sx += w * S[i], sy += w * t[i], sxx += w * S[i] * S[i], sxy += w * S[i] * t[i];
    }
    double det = sw * sxx - sx * sx, a = 0, b = 0;
    if (n >= 2 && det > 0) {
        a = (sy * sxx - sx * sxy) / det;
        b = (sw * sxy - sx * sy) / det;
    }
    if (n < 2 || det <= 0 || a < 0 || b <= 0) {
        a = 0; /* through the origin: beta = sum(w S t) / sum(w S^2) */
        b = sxx > 0 ? sxy / sxx : 0;
    }
    if (b <= 0)
        b = t[n - 1] / (S[n - 1] > 0 ? S[n - 1] : 1);
    *alpha = a;
    *beta = b;
}

static double plan_entry_eval(const plan_centry_t *c, double bytes)
{
    const mesh_plan_calib_entry_t *e = &c->e;
    int n = e->npoints;
    double beta = plan_busbw_factor(e->op, e->nranks) / e->busbw;
#define FIT(S) (e->alpha + beta * (S))
    if (bytes <= c->bytes[0] || n == 1)
        return c->t[0] * FIT(bytes) / FIT(c->bytes[0]);
    if (bytes >= c->bytes[n - 1])
        return c->t[n - 1] * FIT(bytes) / FIT(c->bytes[n - 1]);
#undef FIT
    int i = 1;
    while (c->bytes[i] < bytes)
        i++;
    double f = (bytes - c->bytes[i - 1]) / (c->bytes[i] - c->bytes[i - 1]);
    return c->t[i - 1] + f * (c->t[i] - c->t[i - 1]);
}

/* One entry from the rows of a group: out-of-place rows when there are any. */
static int plan_entry_build(plan_centry_t *c, const plan_row_t *rows, const int *idx, int n)
{
    int oop = 0, k = 0;
    for (int i = 0; i < n; i++)
        oop += !rows[idx[i]].in_place;
    double *S = malloc(sizeof(double) * n), *T = malloc(sizeof(double) * n),
           *tmp = malloc(sizeof(double) * n);
    if (!S || !T || !tmp) {
        free(S), free(T), free(tmp);
        return -1;
    }
    /* distinct sizes in ascending order, the median time of each */
    double last = -1;
    for (;;) {
        double next = INFINITY;
        for (int i = 0; i < n; i++) {
            const plan_row_t *r = &rows[idx[i]];
            if ((!oop || !r->in_place) && r->bytes > last && r->bytes < next)
                next = r->bytes;
        }
        if (next == INFINITY)
            break;
        int m = 0;
        for (int i = 0; i < n; i++) {
            const plan_row_t *r = &rows[idx[i]];
            if ((!oop || !r->in_place) && r->bytes == next)
                tmp[m++] = r->t;
        }
        qsort(tmp, m, sizeof(double), mesh_par_cmp_double);
        S[k] = next;
        T[k++] = m % 2 ? tmp[m / 2] : 0.5 * (tmp[m / 2 - 1] + tmp[m / 2]);
        last = next;
    }
    free(tmp);
    const plan_row_t *r0 = &rows[idx[0]];
    mesh_plan_calib_entry_t *e = &c->e;
    memset(e, 0, sizeof(*e));
    snprintf(e->axis, sizeof(e->axis), "%s", r0->axis);
    snprintf(e->mem, sizeof(e->mem), "%s", r0->mem);
    e->op = r0->op;
    e->nranks = r0->nranks;
    e->nodes = r0->nodes;
    e->npoints = k;
    e->min_bytes = S[0];
    e->max_bytes = S[k - 1];
    double beta;
    plan_fit(S, T, k, &e->alpha, &beta);
    e->busbw = plan_busbw_factor(e->op, e->nranks) / beta;
    for (int i = 0; i < k; i++) {
        double err = fabs(e->alpha + beta * S[i] - T[i]) / T[i];
        if (err > e->fit_err)
            e->fit_err = err;
    }
    c->bytes = S;
    c->t = T;
    return 0;
}

/* Splits one CSV line into up to max fields (pointers and lengths). */
static int plan_fields(const char *line, size_t len, const char **f, size_t *flen, int max)
{
    int k = 0;
    for (size_t pos = 0; pos <= len && k < max; k++) {
        size_t w = strcspn(line + pos, ",\r\n");
        if (pos + w > len)
            w = len - pos;
        f[k] = line + pos;
        flen[k] = w;
        pos += w + 1;
    }
    return k;
}

static int plan_num(const char *s, size_t len, double *v)
{
    char buf[64], *end;
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    errno = 0;
    *v = strtod(buf, &end);
    return *end || errno || !isfinite(*v) ? -1 : 0;
}

static mesh_status_t plan_parse_rows(const char *csv, plan_row_t **rows_out, int *nrows)
{
    int col[C_COUNT], lineno = 0, n = 0, cap = 0, have_header = 0, first_line = 0;
    plan_row_t *rows = NULL;
    for (const char *p = csv; *p;) {
        size_t len = strcspn(p, "\n");
        lineno++;
        const char *line = p;
        p += len + (p[len] == '\n');
        if (len == 0 || line[0] == '#' || (len == 1 && line[0] == '\r'))
            continue;
        if (!have_header) {
            if (plan_header(line, len, col) != 0) {
                free(rows);
                return mesh_par_error(MESH_ERR_INVALID_ARG,
                                      "calibration: line %d is not "
                                      "mesh-bench's CSV header (op, nranks, bytes, time_us, ... "
                                      "axis)",
                                      lineno);
            }
            have_header = 1;
            continue;
        }
        const char *f[32];
        size_t fl[32];
        int nf = plan_fields(line, len, f, fl, 32);
        plan_row_t r = {.nodes = 1};
        double v;
        int bad = 0;
        for (int i = 0; i < C_COUNT && !bad; i++)
            if (col[i] >= nf && (i == C_OP || i == C_NRANKS || i == C_BYTES || i == C_TIME))
                bad = 1;
        if (!bad) {
            int op = plan_op_of(f[col[C_OP]], fl[col[C_OP]]);
            if (plan_num(f[col[C_NRANKS]], fl[col[C_NRANKS]], &v) || v < 1)
                bad = 1;
            r.nranks = (int)v;
            if (plan_num(f[col[C_BYTES]], fl[col[C_BYTES]], &r.bytes) || r.bytes < 0)
                bad = 1;
            if (plan_num(f[col[C_TIME]], fl[col[C_TIME]], &v))
                bad = 1;
            r.t = v * 1e-6;
            if (col[C_NODES] >= 0 && col[C_NODES] < nf) {
                if (plan_num(f[col[C_NODES]], fl[col[C_NODES]], &v) || v < 1)
                    bad = 1;
                r.nodes = (int)v;
            }
            if (col[C_INPLACE] >= 0 && col[C_INPLACE] < nf) {
                if (plan_num(f[col[C_INPLACE]], fl[col[C_INPLACE]], &v))
                    bad = 1;
                r.in_place = v != 0;
            }
            snprintf(r.axis, sizeof(r.axis), "world");
            if (col[C_AXIS] >= 0 && col[C_AXIS] < nf && fl[col[C_AXIS]] > 0)
                snprintf(r.axis, sizeof(r.axis), "%.*s", (int)fl[col[C_AXIS]], f[col[C_AXIS]]);
            snprintf(r.mem, sizeof(r.mem), "host");
            if (col[C_MEM] >= 0 && col[C_MEM] < nf && fl[col[C_MEM]] > 0)
                snprintf(r.mem, sizeof(r.mem), "%.*s", (int)fl[col[C_MEM]], f[col[C_MEM]]);
            r.op = (mesh_plan_op_t)op;
            if (!bad && (op < 0 || r.bytes <= 0 || r.t <= 0))
                continue; /* not the planner's */
        }
        if (!bad && n > 0 && strcmp(r.mem, rows[0].mem) != 0) {
            mesh_status_t st = mesh_par_error(MESH_ERR_INVALID_ARG,
                                              "calibration: line %d measured %s buffers, line "
                                              "%d %s ones: calibrate from the runs of one memory",
                                              lineno, r.mem, first_line, rows[0].mem);
            free(rows);
            return st;
        }
        if (bad) {
            free(rows);
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "calibration: line %d: a field is "
                                  "missing or not a number",
                                  lineno);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            plan_row_t *nr = realloc(rows, sizeof(*rows) * cap);
            if (!nr) {
                free(rows);
                return mesh_par_error(MESH_ERR_NO_MEMORY, "calibration: out of memory");
            }
            rows = nr;
        }
        if (n == 0)
            first_line = lineno;
        rows[n++] = r;
    }
    *rows_out = rows;
    *nrows = n;
    return MESH_OK;
}

mesh_status_t mesh_plan_calib_parse(const char *csv, mesh_plan_calib_t **out)
{
    plan_row_t *rows;
    int n;
    if (!csv || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_calib_parse: %s is NULL",
                              csv ? "out" : "csv");
    MESH_PAR_CHECK(plan_parse_rows(csv, &rows, &n));
    mesh_plan_calib_t *c = calloc(1, sizeof(*c));
    int *idx = malloc(sizeof(int) * (n ? n : 1)), *done = calloc(n ? n : 1, sizeof(int));
    if (!c || !idx || !done || !(c->ent = calloc(n ? n : 1, sizeof(*c->ent)))) {
        free(rows), free(idx), free(done), free(c);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "calibration: out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && rows[j].op == rows[i].op && rows[j].nranks == rows[i].nranks &&
                rows[j].nodes == rows[i].nodes && strcmp(rows[j].axis, rows[i].axis) == 0) {
                idx[m++] = j;
                done[j] = 1;
            }
        if (plan_entry_build(&c->ent[c->n], rows, idx, m) != 0) {
            free(rows), free(idx), free(done);
            mesh_plan_calib_free(c);
            return mesh_par_error(MESH_ERR_NO_MEMORY, "calibration: out of memory");
        }
        c->n++;
    }
    free(rows), free(idx), free(done);
    if (c->n == 0) {
        mesh_plan_calib_free(c);
        return mesh_par_error(MESH_ERR_NOT_FOUND,
                              "calibration: no row of allreduce, allgather, "
                              "reduce_scatter, alltoall or sendrecv with a size and a time");
    }
    *out = c;
    return MESH_OK;
}

mesh_status_t mesh_plan_calib_load(const char *path, mesh_plan_calib_t **out)
{
    if (!path || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_calib_load: %s is NULL",
                              path ? "out" : "path");
    FILE *f = fopen(path, "r");
    if (!f)
        return mesh_par_error(MESH_ERR_IO, "calibration: cannot read %s: %s", path,
                              strerror(errno));
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = cap < (1u << 30) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "calibration: %s is too large", path);
    if (err) {
        free(buf);
        return mesh_par_error(MESH_ERR_IO, "calibration: error reading %s", path);
    }
    buf[len] = 0;
    mesh_status_t st = mesh_plan_calib_parse(buf, out);
    free(buf);
    if (st != MESH_OK)
        return mesh_par_error(st, "%s: %s", path, mesh_comm_last_error(NULL));
    return MESH_OK;
}

void mesh_plan_calib_free(mesh_plan_calib_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->ent[i].bytes);
        free(c->ent[i].t);
    }
    free(c->ent);
    free(c);
}

int mesh_plan_calib_count(const mesh_plan_calib_t *c)
{
    return c ? c->n : 0;
}

mesh_status_t mesh_plan_calib_entry(const mesh_plan_calib_t *c, int i, mesh_plan_calib_entry_t *out)
{
    if (!c || !out || i < 0 || i >= c->n)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_calib_entry: %s",
                              !c || !out ? "NULL argument" : "index out of range");
    *out = c->ent[i].e;
    return MESH_OK;
}

int mesh_plan_calib_points(const mesh_plan_calib_t *c, int i, double *bytes, double *seconds,
                           int max)
{
    if (!c || i < 0 || i >= c->n)
        return -1;
    const plan_centry_t *e = &c->ent[i];
    for (int k = 0; k < e->e.npoints && k < max; k++) {
        if (bytes)
            bytes[k] = e->bytes[k];
        if (seconds)
            seconds[k] = e->t[k];
    }
    return e->e.npoints;
}

static const plan_centry_t *plan_calib_exact(const mesh_plan_calib_t *c, const char *axis,
                                             mesh_plan_op_t op, int n, int nodes)
{
    for (int i = 0; i < c->n; i++) {
        const mesh_plan_calib_entry_t *e = &c->ent[i].e;
        if (e->op == op && e->nranks == n && e->nodes == nodes && strcmp(e->axis, axis) == 0)
            return &c->ent[i];
    }
    return NULL;
}

mesh_status_t mesh_plan_calib_predict(const mesh_plan_calib_t *c, const char *axis,
                                      mesh_plan_op_t op, int nranks, int nodes, double bytes,
                                      double *seconds)
{
    if (!c || !axis || !seconds || op < 0 || op >= MESH_PLAN_OP_COUNT || !(bytes >= 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_calib_predict: bad argument");
    const plan_centry_t *e = plan_calib_exact(c, axis, op, nranks, nodes);
    if (!e)
        return mesh_par_error(MESH_ERR_NOT_FOUND,
                              "calibration: no %s on axis %s with %d ranks "
                              "on %d node%s",
                              mesh_plan_op_name(op), axis, nranks, nodes, nodes == 1 ? "" : "s");
    *seconds = plan_entry_eval(e, bytes);
    return MESH_OK;
}

/* The fit of an entry carried to n ranks: latency per step and bus bandwidth kept. */
static double plan_entry_scaled(const plan_centry_t *c, mesh_plan_op_t op, int n, double bytes)
{
    const mesh_plan_calib_entry_t *e = &c->e;
    int s0 = plan_op_steps(e->op, e->nranks), s1 = plan_op_steps(op, n);
    double lat = s0 > 0 ? e->alpha / s0 : e->alpha;
    return lat * s1 + bytes * plan_busbw_factor(op, n) / e->busbw;
}

int plan_calib_time(const mesh_plan_calib_t *c, const char *axis, mesh_plan_op_t op, int n,
                    int nodes, double bytes, double *seconds)
{
    const plan_centry_t *best = NULL;
    if (!c)
        return 0;
    const plan_centry_t *e = plan_calib_exact(c, axis, op, n, nodes);
    if (e) {
        *seconds = plan_entry_eval(e, bytes);
        return 1;
    }
    /* the same op on the same side of the node boundary: this axis first, then the largest
     * group measured (its fit is the least dominated by a single link) */
    for (int pass = 0; pass < 2 && !best; pass++) {
        mesh_plan_op_t want = pass == 0 ? op : MESH_PLAN_OP_ALLGATHER;
        if (pass == 1 && op != MESH_PLAN_OP_ALLTOALL)
            break;
        for (int i = 0; i < c->n; i++) {
            const mesh_plan_calib_entry_t *x = &c->ent[i].e;
            if (x->op != want || (x->nodes > 1) != (nodes > 1))
                continue;
            int same = strcmp(x->axis, axis) == 0;
            if (!best || (same && strcmp(best->e.axis, axis) != 0) ||
                (same == (strcmp(best->e.axis, axis) == 0) && x->nranks > best->e.nranks))
                best = &c->ent[i];
        }
    }
    if (!best)
        return 0;
    *seconds = plan_entry_scaled(best, op, n, bytes);
    return 1;
}
