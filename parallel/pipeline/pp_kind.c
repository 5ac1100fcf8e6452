/* The pipeline schedules' names: the one spelling every tool and layer uses, and the aliases
 * accepted. Apart from the schedule object so that the planner's tool compiles it alone. */
#include "pp.h"

#include <string.h>

static const char *const pp_kind_names[MESH_PP_KIND_COUNT] = {
    [MESH_PP_AFAB] = "afab", [MESH_PP_1F1B] = "1f1b", [MESH_PP_INTERLEAVED] = "interleaved",
    [MESH_PP_ZB1] = "zb1",   [MESH_PP_ZBV] = "zbv",   [MESH_PP_USER] = "user",
    [MESH_PP_NONE] = "none"};

const char *mesh_pp_kind_name(mesh_pp_kind_t kind)
{
    return (unsigned)kind < MESH_PP_KIND_COUNT ? pp_kind_names[kind] : NULL;
}

mesh_status_t mesh_pp_kind_parse(const char *name, mesh_pp_kind_t *kind)
{
    static const struct {
        const char *alias;
        mesh_pp_kind_t kind;
    } aliases[] = {{"gpipe", MESH_PP_AFAB}, {"zbh1", MESH_PP_ZB1}, {"zb-h1", MESH_PP_ZB1}};
    if (name == NULL || kind == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_kind_parse: %s is NULL",
                              name == NULL ? "name" : "kind");
    for (int k = 0; k < MESH_PP_KIND_COUNT; k++)
        if (strcmp(name, pp_kind_names[k]) == 0) {
            *kind = (mesh_pp_kind_t)k;
            return MESH_OK;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(name, aliases[i].alias) == 0) {
            *kind = aliases[i].kind;
            return MESH_OK;
        }
    return mesh_par_error(MESH_ERR_INVALID_ARG,
                          "unknown pipeline schedule '%s': afab (gpipe), 1f1b, interleaved, zb1 "
                          "(zbh1, zb-h1), zbv, user or none",
                          name);
}
