/* Network transport selection without processes: MESH_NET parsing and the per-peer ordering of
 * transports (scope, then MESH_NET order, then priority). */
#include "config.h"
#include "collectives/route.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "tests/harness/harness.h"
#include <string.h>

static mesh_tl_ops_t fake_ops[5];

static mesh_comm_tl_t tl(int k, const char *name, mesh_tl_scope_t scope, int prio)
{
    fake_ops[k].name = name;
    mesh_comm_tl_t t = {.ops = &fake_ops[k]};
    t.caps.scope = scope;
    t.caps.priority = prio;
    return t;
}

int main(void)
{
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    mesh_route_t r;
    CHECK(mesh_route_parse_net("verbs,ucx,ofi,tcp", 0, &r) == MESH_OK);
    CHECK(r.n == 4 && !r.explicit_net);
    CHECK(mesh_route_net_index(&r, "verbs") == 0 && mesh_route_net_index(&r, "tcp") == 3);
    CHECK(mesh_route_net_index(&r, "shm") == -1);
    /* duplicates count once; order kept */
    CHECK(mesh_route_parse_net("ofi,tcp,ofi", 1, &r) == MESH_OK && r.n == 2 && r.explicit_net);
    CHECK(strcmp(r.name[0], "ofi") == 0 && strcmp(r.name[1], "tcp") == 0);
    CHECK(mesh_route_parse_net("", 1, &r) == MESH_OK && r.n == 0);
    /* unknown names and empty entries are errors naming them */
    CHECK(mesh_route_parse_net("tcp,infiniband", 1, &r) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "'infiniband'") != NULL);
    CHECK(mesh_route_parse_net("tcp,,verbs", 1, &r) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_route_parse_net("averyveryverylongname", 1, &r) == MESH_ERR_INVALID_ARG);
    /* registry names parse (shm is refused later, once it is known not to be a network one) */
    CHECK(mesh_route_parse_net("shm", 1, &r) == MESH_OK);

    CHECK(mesh_route_net_priority("verbs") == MESH_TL_PRIO_VERBS);
    CHECK(mesh_route_net_priority("ucx") == MESH_TL_PRIO_UCX);
    CHECK(mesh_route_net_priority("ofi") == MESH_TL_PRIO_OFI);
    CHECK(mesh_route_net_priority("tcp") == MESH_TL_PRIO_TCP);
    CHECK(mesh_route_net_priority("shm") == -1);
    CHECK(MESH_TL_PRIO_VERBS > MESH_TL_PRIO_UCX && MESH_TL_PRIO_UCX > MESH_TL_PRIO_OFI &&
          MESH_TL_PRIO_OFI > MESH_TL_PRIO_TCP);
    CHECK(strcmp(mesh_route_known_net(0), "verbs") == 0 && mesh_route_known_net(4) == NULL);

    mesh_comm_tl_t self = tl(0, "self", MESH_TL_SCOPE_SELF, 100);
    mesh_comm_tl_t shm = tl(1, "shm", MESH_TL_SCOPE_NODE, 50);
    mesh_comm_tl_t tcp = tl(2, "tcp", MESH_TL_SCOPE_NET, MESH_TL_PRIO_TCP);
    mesh_comm_tl_t verbs = tl(3, "verbs", MESH_TL_SCOPE_NET, MESH_TL_PRIO_VERBS);
    mesh_comm_tl_t other = tl(4, "other", MESH_TL_SCOPE_NET, 99);
    CHECK(mesh_route_parse_net("verbs,ucx,ofi,tcp", 0, &r) == MESH_OK);
    CHECK(mesh_route_better(&r, &self, &shm) && !mesh_route_better(&r, &shm, &self));
    CHECK(mesh_route_better(&r, &shm, &verbs) && !mesh_route_better(&r, &tcp, &shm));
    CHECK(mesh_route_better(&r, &verbs, &tcp) && !mesh_route_better(&r, &tcp, &verbs));
    /* the MESH_NET order wins over priority, and named beats unnamed */
    CHECK(mesh_route_better(&r, &tcp, &other) && !mesh_route_better(&r, &other, &tcp));
    CHECK(mesh_route_parse_net("tcp,verbs", 1, &r) == MESH_OK);
    CHECK(mesh_route_better(&r, &tcp, &verbs) && !mesh_route_better(&r, &verbs, &tcp));
    printf("route: ok\n");
    return 0;
}
