/* The trainer's entry: the best layout for a world size and a node size. */
#include "planner.h"

#include <stdio.h>
#include <string.h>

mesh_status_t mesh_plan_best(const mesh_plan_model_t *model, int world, int ranks_per_node,
                             const mesh_plan_params_t *params, mesh_plan_layout_t *out)
{
    mesh_plan_cluster_t cl;
    mesh_plan_params_t p;
    if (!model || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_best: %s is NULL",
                              model ? "out" : "model");
    if (world < 1 || ranks_per_node < 1 || world % ranks_per_node)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_plan_best: world %d and ranks_per_node "
                              "%d: the world must be a positive multiple of the node size",
                              world, ranks_per_node);
    memset(&p, 0, sizeof(p));
    if (params)
        p = *params;
    if ((p.field_mask & MESH_PLAN_PARAM_FIELD_CLUSTER) && p.cluster) {
        cl = *p.cluster;
    } else {
        MESH_PAR_CHECK(mesh_plan_cluster_preset("cpu", world, &cl));
    }
    cl.gpus = world;
    cl.gpus_per_node = ranks_per_node;
    if (!((p.field_mask & MESH_PLAN_PARAM_FIELD_BATCH) && p.batch_tokens > 0) &&
        !(model->batch_tokens > 0)) {
        p.field_mask |= MESH_PLAN_PARAM_FIELD_BATCH;
        p.batch_tokens = (double)world * model->seq; /* one sequence per rank */
    }
    p.field_mask |= MESH_PLAN_PARAM_FIELD_TOP;
    p.top = 1;
    mesh_plan_result_h r;
    MESH_PAR_CHECK(mesh_plan_search(model, &cl, &p, &r));
    const mesh_plan_eval_t *e = mesh_plan_result_layout(r, 0);
    if (!e) {
        const mesh_plan_eval_t *why = mesh_plan_result_rejected(r, 0);
        mesh_status_t st = mesh_par_error(MESH_ERR_NOT_FOUND,
                                          "mesh_plan_best: no layout of %d "
                                          "ranks fits model %s%s%s",
                                          world, model->name, why ? ": " : "", why ? why->why : "");
        mesh_plan_result_free(r);
        return st;
    }
    *out = e->layout;
    mesh_plan_result_free(r);
    return MESH_OK;
}
