/*
 * The time of one collective on an axis: alpha-beta with the cluster's nominal latency per
 * step and bus bandwidth (inside a node or across nodes), unless the calibration measured the
 * axis or one on the same side of the node boundary.
 */
#include "planner.h"

double plan_busbw_factor(mesh_plan_op_t op, int n)
{
    if (n <= 1)
        return op == MESH_PLAN_OP_SENDRECV ? 1.0 : 0.0;
    switch (op) {
    case MESH_PLAN_OP_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case MESH_PLAN_OP_ALLGATHER:
    case MESH_PLAN_OP_REDUCE_SCATTER:
    case MESH_PLAN_OP_ALLTOALL:
        return (double)(n - 1) / n;
    default:
        return 1.0;
    }
}

int plan_op_steps(mesh_plan_op_t op, int n)
{
    if (n <= 1)
        return op == MESH_PLAN_OP_SENDRECV ? 1 : 0;
    switch (op) {
    case MESH_PLAN_OP_ALLREDUCE:
        return 2 * (n - 1);
    case MESH_PLAN_OP_ALLGATHER:
    case MESH_PLAN_OP_REDUCE_SCATTER:
    case MESH_PLAN_OP_ALLTOALL:
        return n - 1;
    default:
        return 1;
    }
}

double plan_coll_time(const plan_ctx_t *x, const char *axis, mesh_plan_op_t op, int n, int nodes,
                      double bytes, int *calibrated)
{
    double t;
    if (bytes <= 0 || (n <= 1 && op != MESH_PLAN_OP_SENDRECV))
        return 0;
    if (x->cl.calib && plan_calib_time(x->cl.calib, axis, op, n, nodes, bytes, &t)) {
        if (calibrated)
            *calibrated = 1;
        return t;
    }
    double lat = nodes > 1 ? x->cl.inter_lat : x->cl.intra_lat;
    double bw = nodes > 1 ? x->cl.inter_bw : x->cl.intra_bw;
    return plan_op_steps(op, n) * lat + bytes * plan_busbw_factor(op, n) / bw;
}
