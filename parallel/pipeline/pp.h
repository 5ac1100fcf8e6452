/* Pipeline schedules inside the layer: the schedule object, shared by the generators, the
 * checker and the executor. */
#ifndef MESH_PP_H
#define MESH_PP_H

#include "../common.h"
#include <mesh/pipeline.h>

typedef struct {
    mesh_pp_action_t *a;
    int n, cap;
} mesh_pp_list_t;

struct mesh_pp_schedule {
    mesh_pp_kind_t kind;
    int p, m, v;
    int *stage_of;        /* [p * v]: model stage of (rank, chunk) at rank * v + chunk */
    mesh_pp_list_t *list; /* [p] */
    /* results of the last successful check; checked drops to 0 on any change */
    int checked;
    int split; /* the schedule has W actions */
    mesh_pp_report_t report;
    double **t0, **t1;   /* [p][n]: start and end of each action */
    double *rank_bubble; /* [p] */
    int *rank_peak;      /* [p] */
};

/* Total model stages. */
static inline int mesh_pp_nstages(const struct mesh_pp_schedule *s)
{
    return s->p * s->v;
}

/* Appends to a rank's list (generators). */
mesh_status_t mesh_pp_push(struct mesh_pp_schedule *s, int rank, mesh_pp_op_t op, int mb, int chunk,
                           int peer);
/* Empty schedule with the default stage map (stage c * p + r). */
mesh_status_t mesh_pp_alloc(mesh_pp_kind_t kind, int p, int m, int v,
                            struct mesh_pp_schedule **out);
void mesh_pp_drop_results(struct mesh_pp_schedule *s);

/* Fills the lists of a generated kind (the schedule is empty, its stage map set). */
mesh_status_t mesh_pp_generate(struct mesh_pp_schedule *s, int group);

/* Where each action stands, built by the structural check for the simulation. */
typedef struct {
    int *rank_at, *chunk_at; /* [p * v]: who holds each model stage */
    int *pos;                /* [p][MESH_PP_OP_COUNT][m][v]: position in the rank's list, or -1 */
    int split;               /* the schedule has W actions */
} mesh_pp_index_t;

static inline int *mesh_pp_pos(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x, int rank,
                               mesh_pp_op_t op, int mb, int chunk)
{
    return &x->pos[(((size_t)rank * MESH_PP_OP_COUNT + op) * (size_t)s->m + (size_t)mb) *
                       (size_t)s->v +
                   (size_t)chunk];
}

/* ZB-V's compute order for one rank (pp_zbv.c): out holds 6 m actions. */
mesh_status_t mesh_pp_zbv_order(const struct mesh_pp_schedule *s, int rank, mesh_pp_action_t *out,
                                int *n);

/* Structural checks (stage map, fields, matching, order, completeness); the first fault found
 * is reported with its rank and position. Fills x (mesh_pp_index_free) on success. */
mesh_status_t mesh_pp_check_structure(const struct mesh_pp_schedule *s, mesh_pp_index_t *x);
void mesh_pp_index_free(mesh_pp_index_t *x);
/* Runs the lists under the executor's rule: deadlock, timeline, bubble and peaks. */
mesh_status_t mesh_pp_simulate(struct mesh_pp_schedule *s, const mesh_pp_index_t *x,
                               const mesh_pp_costs_t *costs);
/* The refusal of a schedule: "<kind> schedule refused: rank R, position I, <action>: <why>". */
mesh_status_t mesh_pp_refuse(const struct mesh_pp_schedule *s, int rank, int index, const char *fmt,
                             ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* "F(mb 3, chunk 0)" or "SEND_F(mb 3, chunk 0) to rank 2" into buf. */
const char *mesh_pp_action_str(const mesh_pp_action_t *a, char *buf, size_t len);
/* Rank and chunk holding a model stage; -1 when none does. */
int mesh_pp_rank_of(const struct mesh_pp_schedule *s, int stage, int *chunk);
/* The peer a send or receive must have by the stage map; -1 when there is none (first or last
 * stage, or the neighbour stage on the same rank). */
int mesh_pp_peer_of(const struct mesh_pp_schedule *s, int rank, const mesh_pp_action_t *a);

#endif
