/* mesh-plan: what its files share. */
#ifndef MESH_PLAN_TOOL_H
#define MESH_PLAN_TOOL_H

#include <mesh/plan.h>
#include <stdio.h>

typedef struct {
    mesh_plan_model_t model;
    int have_model;
    double model_counted;      /* parameters counted from the dimensions, before any params= */
    const char *model_changes; /* what --model changed of a preset */
    mesh_plan_cluster_t cluster;
    int have_cluster;
    int from_topo, nodes, ranks_per_node;
    char topo_note[512]; /* what --from-topo found */
    mesh_plan_params_t params;
    const char *check; /* --check LAYOUT */
    const char *calib_path, *compare_path;
    mesh_plan_calib_t *calib;
    double tolerance; /* --compare: largest relative error that passes */
    double min_bytes; /* --compare: smallest size compared */
    int json, top, rejected, list_models, list_clusters;
} plan_opts_t;

/* mesh-plan-topo.c: the cluster of --from-topo (this machine's node, nodes of them); 0, or -1
 * after printing why. */
int plan_topo_cluster(plan_opts_t *o);

/* mesh-plan-out.c */
void plan_print_header(const plan_opts_t *o, FILE *f);
void plan_print_layout(const plan_opts_t *o, const mesh_plan_eval_t *e, int rank,
                       const mesh_plan_eval_t *best, int full, FILE *f);
void plan_print_result(const plan_opts_t *o, mesh_plan_result_h r, FILE *f);
void plan_json_result(const plan_opts_t *o, mesh_plan_result_h r, const char *mode, FILE *f);
void plan_print_calib(const plan_opts_t *o, FILE *f);
/* --compare: prints the table and returns 0 when every size is within the tolerance. */
int plan_compare(const plan_opts_t *o, const mesh_plan_calib_t *second, FILE *f);
void plan_list_models(int json, FILE *f);
void plan_list_clusters(int json, FILE *f);

#endif
