/* The 5D mesh grid's arithmetic: parameters, order string, groups, expert grid, node check. */
#define MESH_LOG_SUBSYSTEM "grid"
#include "libmesh/grid_layout.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const grid_axis_names[MESH_GRID_AXIS_IDS] = {"tp", "cp",  "ep", "dp",
                                                                "pp", "etp", "edp"};
static const char grid_default_order[] = "tp-cp-ep-dp-pp";

const char *mesh_grid_axis_name(int id)
{
    return id >= 0 && id < MESH_GRID_AXIS_IDS ? grid_axis_names[id] : NULL;
}

static int grid_axis_id(const char *name, size_t len)
{
    for (int id = 0; id < MESH_GRID_AXIS_IDS; id++)
        if (strlen(grid_axis_names[id]) == len && strncmp(grid_axis_names[id], name, len) == 0)
            return id;
    return -1;
}

/* Splits "a-b-c" into ids; dense_only rejects etp and edp. Reports the first bad token. */
static mesh_status_t grid_split_names(const char *what, const char *s, int dense_only, int *ids,
                                      int *n)
{
    unsigned seen = 0;
    int count = 0;
    if (*s == '\0')
        return mesh_error(MESH_ERR_INVALID_ARG, "%s is empty", what);
    for (const char *p = s;;) {
        const char *end = strchr(p, '-');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int id = grid_axis_id(p, len);
        if (len == 0)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s has an empty axis name", what);
        if (id < 0 || (dense_only && id >= MESH_AXIS_COUNT))
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: unknown axis '%.*s' (axes: %s)", what,
                              (int)len, p,
                              dense_only ? "tp, cp, ep, dp, pp" : "tp, cp, ep, dp, pp, etp, edp");
        if (seen & MESH_GRID_BIT(id))
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: axis %s appears twice", what,
                              grid_axis_names[id]);
        seen |= MESH_GRID_BIT(id);
        ids[count++] = id;
        if (!end)
            break;
        p = end + 1;
    }
    *n = count;
    return MESH_OK;
}

mesh_status_t mesh_grid_parse_axes(const char *fn, const char *names, mesh_grid_kind_t *kind,
                                   unsigned *mask)
{
    char what[128];
    int ids[MESH_GRID_AXIS_IDS + 1], n;
    unsigned m = 0;
    const unsigned dense_only =
        MESH_GRID_BIT(MESH_AXIS_TP) | MESH_GRID_BIT(MESH_AXIS_CP) | MESH_GRID_BIT(MESH_AXIS_DP);
    const unsigned expert_only =
        MESH_GRID_BIT(MESH_GRID_AXIS_ETP) | MESH_GRID_BIT(MESH_GRID_AXIS_EDP);

    if (names == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: axes is NULL", fn);
    snprintf(what, sizeof(what), "%s: axes '%.64s'", fn, names);
    /* a name repeated more often than there are axes is caught as a repeat before overflow */
    if (strlen(names) > 64)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s is too long", what);
    MESH_CHECK(grid_split_names(what, names, 0, ids, &n));
    for (int i = 0; i < n; i++)
        m |= MESH_GRID_BIT(ids[i]);
    if ((m & dense_only) && (m & expert_only))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "%s mixes the dense grid's axes (tp, cp, dp) with "
                          "the expert grid's (etp, edp)",
                          what);
    *kind = (m & expert_only) || (!(m & dense_only) && (m & MESH_GRID_BIT(MESH_AXIS_EP)))
                ? MESH_GRID_EXPERT
                : MESH_GRID_DENSE;
    *mask = m;
    return MESH_OK;
}

/* The order as given, with the axes it leaves out (all of size 1) inserted after the axis that
 * precedes them in the default order, so the expert grid derived from it stays natural. */
static void grid_full_order(const int *given, int n, int *full)
{
    int count = n;
    unsigned present = 0;
    memcpy(full, given, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        present |= MESH_GRID_BIT(given[i]);
    for (int id = 0; id < MESH_AXIS_COUNT; id++) {
        if (present & MESH_GRID_BIT(id))
            continue;
        int at = 0; /* after the previous axis of the default order, or first */
        for (int i = 0; i < count; i++)
            if (full[i] == id - 1)
                at = i + 1;
        memmove(full + at + 1, full + at, sizeof(int) * (size_t)(count - at));
        full[at] = id;
        count++;
        present |= MESH_GRID_BIT(id);
    }
}

static void grid_dims_set(mesh_grid_dims_t *d, const int *ids, int n, const int *size)
{
    int stride = 1;
    d->naxes = n;
    for (int i = 0; i < n; i++) {
        d->id[i] = ids[i];
        d->size[i] = size[ids[i]];
        d->stride[i] = stride;
        stride *= d->size[i];
    }
}

static int grid_dims_pos(const mesh_grid_dims_t *d, int id)
{
    for (int i = 0; i < d->naxes; i++)
        if (d->id[i] == id)
            return i;
    return -1;
}

static mesh_status_t grid_read_sizes(mesh_grid_layout_t *l, int world, const mesh_grid_params_t *p)
{
    long long product = 1;
    for (int id = 0; id < MESH_AXIS_COUNT; id++) {
        int s = p && (p->field_mask & MESH_GRID_PARAM_FIELD_SIZES) ? p->size[id] : 1;
        if (s < 0)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "mesh_grid: size of %s is %d; axis sizes "
                              "must be positive (0 means 1)",
                              grid_axis_names[id], s);
        l->size[id] = s == 0 ? 1 : s;
        /* capped so that five large sizes cannot overflow */
        product = product > world ? product : product * l->size[id];
    }
    if (product != world) {
        const int *s = l->size;
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_grid: tp=%d x cp=%d x ep=%d x dp=%d x pp=%d "
                          "does not match the world size %d",
                          s[0], s[1], s[2], s[3], s[4], world);
    }
    return MESH_OK;
}

static mesh_status_t grid_read_order(mesh_grid_layout_t *l, const mesh_grid_params_t *p, int *full)
{
    const char *order = p && (p->field_mask & MESH_GRID_PARAM_FIELD_ORDER) && p->order
                            ? p->order
                            : grid_default_order;
    char what[96];
    int ids[MESH_AXIS_COUNT + 1], n;
    snprintf(what, sizeof(what), "mesh_grid: order '%.48s'", order);
    if (strlen(order) > 48)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s is too long", what);
    MESH_CHECK(grid_split_names(what, order, 1, ids, &n));
    unsigned present = 0;
    for (int i = 0; i < n; i++)
        present |= MESH_GRID_BIT(ids[i]);
    for (int id = 0; id < MESH_AXIS_COUNT; id++)
        if (!(present & MESH_GRID_BIT(id)) && l->size[id] > 1)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s leaves out axis %s of size %d", what,
                              grid_axis_names[id], l->size[id]);
    grid_full_order(ids, n, full);
    return MESH_OK;
}

/* The expert grid: the dense order with tp as etp, dp as edp and cp left out. */
static mesh_status_t grid_expert(mesh_grid_layout_t *l, const mesh_grid_params_t *p,
                                 const int *full)
{
    int etp = l->size[MESH_AXIS_TP], asked = l->size[MESH_AXIS_EP] > 1;
    if (p && (p->field_mask & MESH_GRID_PARAM_FIELD_EXPERT_TP)) {
        if (p->expert_tp < 0)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "mesh_grid: expert_tp=%d must be positive "
                              "(0 means tp)",
                              p->expert_tp);
        if (p->expert_tp > 0)
            etp = p->expert_tp;
        asked = 1;
    }
    long long inner = (long long)etp * l->size[MESH_AXIS_EP] * l->size[MESH_AXIS_PP];
    if (l->world % inner != 0)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_grid: expert_tp=%d x ep=%d x pp=%d does not "
                          "divide the world size %d",
                          etp, l->size[MESH_AXIS_EP], l->size[MESH_AXIS_PP], l->world);
    l->size[MESH_GRID_AXIS_ETP] = etp;
    l->size[MESH_GRID_AXIS_EDP] = (int)(l->world / inner);

    int ids[MESH_AXIS_COUNT], n = 0;
    for (int i = 0; i < MESH_AXIS_COUNT; i++) {
        if (full[i] == MESH_AXIS_CP)
            continue;
        ids[n++] = full[i] == MESH_AXIS_TP   ? MESH_GRID_AXIS_ETP
                   : full[i] == MESH_AXIS_DP ? MESH_GRID_AXIS_EDP
                                             : full[i];
    }
    grid_dims_set(&l->dims[MESH_GRID_EXPERT], ids, n, l->size);

    /* pipeline stages are shared: each rank must have the same pp peers in both grids */
    const unsigned pp = MESH_GRID_BIT(MESH_AXIS_PP);
    l->expert_ok = 1;
    for (int g = 0; g < l->world && l->expert_ok; g++) {
        int dg, di, eg, ei;
        mesh_grid_layout_member(l, MESH_GRID_DENSE, pp, g, &dg, &di);
        mesh_grid_layout_member(l, MESH_GRID_EXPERT, pp, g, &eg, &ei);
        if (di != ei || dg != eg)
            l->expert_ok = 0;
    }
    if (!l->expert_ok) {
        int ds = l->dims[0].stride[grid_dims_pos(&l->dims[0], MESH_AXIS_PP)];
        int es = l->dims[1].stride[grid_dims_pos(&l->dims[1], MESH_AXIS_PP)];
        snprintf(l->expert_why, sizeof(l->expert_why),
                 "the expert grid (expert_tp=%d, ep=%d, edp=%d) has other pp groups than the dense "
                 "grid (pp rank stride %d instead of %d); put pp outermost or make expert_tp x ep "
                 "equal the axes inside pp",
                 etp, l->size[MESH_AXIS_EP], l->size[MESH_GRID_AXIS_EDP], es, ds);
        if (asked)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_grid: %s", l->expert_why);
    }
    return MESH_OK;
}

mesh_status_t mesh_grid_layout_init(mesh_grid_layout_t *l, int world, const mesh_grid_params_t *p)
{
    int full[MESH_AXIS_COUNT];
    mesh_status_t st;

    memset(l, 0, sizeof(*l));
    if (world < 1)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_grid: world size %d is not positive", world);
    l->world = world;
    if (p && (p->field_mask & MESH_GRID_PARAM_FIELD_FLAGS)) {
        if (p->flags & ~(unsigned)MESH_GRID_REORDER)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_grid: flags 0x%x has unknown bits",
                              p->flags);
        l->flags = p->flags;
    }
    l->intra = MESH_GRID_BIT(MESH_AXIS_TP) | MESH_GRID_BIT(MESH_GRID_AXIS_ETP);
    if (p && (p->field_mask & MESH_GRID_PARAM_FIELD_INTRA_NODE)) {
        if (p->intra_node & ~((1u << MESH_AXIS_COUNT) - 1))
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "mesh_grid: intra_node 0x%x names no axis "
                              "(bits 0..%d are tp, cp, ep, dp, pp)",
                              p->intra_node, MESH_AXIS_COUNT - 1);
        l->intra |= p->intra_node;
    }
    MESH_CHECK(grid_read_sizes(l, world, p));
    MESH_CHECK(grid_read_order(l, p, full));
    grid_dims_set(&l->dims[MESH_GRID_DENSE], full, MESH_AXIS_COUNT, l->size);
    MESH_CHECK(grid_expert(l, p, full));

    l->world_of = malloc(sizeof(int) * (size_t)world);
    l->grid_of = malloc(sizeof(int) * (size_t)world);
    if (l->world_of == NULL || l->grid_of == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "mesh_grid: cannot allocate %d ranks", world);
        mesh_grid_layout_free(l);
        return st;
    }
    for (int r = 0; r < world; r++)
        l->world_of[r] = l->grid_of[r] = r;
    return MESH_OK;
}

void mesh_grid_layout_free(mesh_grid_layout_t *l)
{
    free(l->world_of);
    free(l->grid_of);
    l->world_of = l->grid_of = NULL;
}

int mesh_grid_layout_axes(const mesh_grid_layout_t *l, mesh_grid_axis_t *out)
{
    int n = 0;
    for (int kind = 0; kind < MESH_GRID_KINDS; kind++) {
        const mesh_grid_dims_t *d = &l->dims[kind];
        if (kind == MESH_GRID_EXPERT && !l->expert_ok)
            continue;
        for (int i = 0; i < d->naxes; i++) {
            int id = d->id[i];
            /* pp is the same in both grids; ep alone is the expert grid's when there is one */
            if (kind == MESH_GRID_DENSE && id == MESH_AXIS_EP && l->expert_ok)
                continue;
            if (kind == MESH_GRID_EXPERT && id == MESH_AXIS_PP)
                continue;
            out[n++] =
                (mesh_grid_axis_t){.kind = (mesh_grid_kind_t)kind, .id = id, .size = d->size[i]};
        }
    }
    return n;
}

unsigned mesh_grid_layout_nontrivial(const mesh_grid_layout_t *l, mesh_grid_kind_t kind,
                                     unsigned mask)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    unsigned out = 0;
    for (int i = 0; i < d->naxes; i++)
        if ((mask & MESH_GRID_BIT(d->id[i])) && d->size[i] > 1)
            out |= MESH_GRID_BIT(d->id[i]);
    return out;
}

int mesh_grid_layout_coord(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, int id, int grank)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    int i = grid_dims_pos(d, id);
    return i < 0 ? -1 : grank / d->stride[i] % d->size[i];
}

void mesh_grid_layout_shape(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                            int *ngroups, int *group_size)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    int gs = 1;
    for (int i = 0; i < d->naxes; i++)
        if (mask & MESH_GRID_BIT(d->id[i]))
            gs *= d->size[i];
    *group_size = gs;
    *ngroups = l->world / gs;
}

void mesh_grid_layout_member(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                             int grank, int *group, int *index)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    int g = 0, gm = 1, x = 0, xm = 1;
    for (int i = 0; i < d->naxes; i++) {
        int c = grank / d->stride[i] % d->size[i];
        if (mask & MESH_GRID_BIT(d->id[i])) {
            x += c * xm;
            xm *= d->size[i];
        } else {
            g += c * gm;
            gm *= d->size[i];
        }
    }
    *group = g;
    *index = x;
}

void mesh_grid_layout_group(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                            int group, int *granks)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    int ngroups, gs, base = 0;
    mesh_grid_layout_shape(l, kind, mask, &ngroups, &gs);
    for (int i = 0, rest = group; i < d->naxes; i++)
        if (!(mask & MESH_GRID_BIT(d->id[i]))) {
            base += rest % d->size[i] * d->stride[i];
            rest /= d->size[i];
        }
    for (int x = 0; x < gs; x++) {
        int r = base;
        for (int i = 0, rest = x; i < d->naxes; i++)
            if (mask & MESH_GRID_BIT(d->id[i])) {
                r += rest % d->size[i] * d->stride[i];
                rest /= d->size[i];
            }
        granks[x] = r;
    }
}

void mesh_grid_layout_mask_name(const mesh_grid_layout_t *l, mesh_grid_kind_t kind, unsigned mask,
                                char *buf, size_t len)
{
    const mesh_grid_dims_t *d = &l->dims[kind];
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < d->naxes; i++)
        if (mask & MESH_GRID_BIT(d->id[i])) {
            int w = snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? "-" : "",
                             grid_axis_names[d->id[i]]);
            if (w > 0)
                at += (size_t)w;
        }
}
