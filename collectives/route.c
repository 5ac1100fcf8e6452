/* Transport selection: MESH_TLS, MESH_NET and the per-peer choice (see route.h). */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/route.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <string.h>

/* Network transports this version knows, whether or not this build contains them, so that
 * MESH_NET=ucx on a build without UCX says "not built" rather than "unknown". */
static const char *const route_known_net[] = {"verbs", "ucx", "ofi", "tcp"};
static const int route_known_prio[] = {MESH_TL_PRIO_VERBS, MESH_TL_PRIO_UCX, MESH_TL_PRIO_OFI,
                                       MESH_TL_PRIO_TCP};

static int known_net(const char *name)
{
    for (unsigned i = 0; i < sizeof(route_known_net) / sizeof(route_known_net[0]); i++)
        if (strcmp(route_known_net[i], name) == 0)
            return 1;
    return 0;
}

int mesh_route_net_priority(const char *name)
{
    for (unsigned i = 0; i < sizeof(route_known_net) / sizeof(route_known_net[0]); i++)
        if (strcmp(route_known_net[i], name) == 0)
            return route_known_prio[i];
    return -1;
}

const char *mesh_route_known_net(int i)
{
    int n = (int)(sizeof(route_known_net) / sizeof(route_known_net[0]));
    return i >= 0 && i < n ? route_known_net[i] : NULL;
}

/* Whether list names the transport; with any_all, "all" counts too. */
static int tl_listed(const char *list, const char *name, int any_all)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        if (any_all && len == 3 && strncmp(p, "all", 3) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

static int tl_allowed(const char *list, const char *name)
{
    return tl_listed(list, name, 1);
}

/* By default a library network transport without RDMA hardware under it gives way to tcp,
 * which drives the same sockets with fewer copies; naming it in MESH_NET or MESH_TLS keeps it. */
static int sockets_only_gives_way(const mesh_route_t *r, const char *allowed,
                                  const mesh_comm_tl_t *t)
{
    return t->caps.scope == MESH_TL_SCOPE_NET && !(t->caps.flags & MESH_TL_CAP_HW_NET) &&
           strcmp(t->ops->name, "tcp") != 0 && !r->explicit_net &&
           !tl_listed(allowed, t->ops->name, 0) && tl_allowed(allowed, "tcp") &&
           mesh_tl_find("tcp") != NULL;
}

mesh_status_t mesh_route_parse_net(const char *spec, int explicit_net, mesh_route_t *r)
{
    memset(r, 0, sizeof(*r));
    r->explicit_net = explicit_net;
    for (const char *p = spec ? spec : ""; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[MESH_ROUTE_NAME_MAX];
        if (len == 0 || len >= sizeof(name))
            return mesh_error(MESH_ERR_INVALID_ARG, "MESH_NET=%s: bad entry '%.*s'", spec, (int)len,
                              p);
        memcpy(name, p, len);
        name[len] = 0;
        p += len + (e != NULL);
        if (!known_net(name) && mesh_tl_find(name) == NULL)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "MESH_NET=%s: unknown transport '%s' (network transports: verbs, "
                              "ucx, ofi, tcp)",
                              spec, name);
        if (mesh_route_net_index(r, name) >= 0)
            continue;
        if (r->n == MESH_ROUTE_NET_MAX)
            return mesh_error(MESH_ERR_INVALID_ARG, "MESH_NET=%s: more than %d transports", spec,
                              MESH_ROUTE_NET_MAX);
        snprintf(r->name[r->n++], MESH_ROUTE_NAME_MAX, "%s", name);
    }
    return MESH_OK;
}

int mesh_route_net_index(const mesh_route_t *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->name[i], name) == 0)
            return i;
    return -1;
}

/* A MESH_NET transport left out: a warning when the user asked for it, else debug. */
static void skip(mesh_route_t *r, int idx, const char *name, const char *why)
{
    if (idx >= 0)
        snprintf(r->why[idx], sizeof(r->why[idx]), "%s", why);
    if (idx >= 0 && r->explicit_net)
        mesh_log_warn("MESH_NET: skipping %s: %s", name, why);
    else
        mesh_log_debug("transport %s skipped: %s", name, why);
}

mesh_status_t mesh_route_open(mesh_comm_t *c, const char *node, mesh_route_t *r)
{
    const char *allowed = mesh_config_str("TLS");
    mesh_tl_open_params_t params = {.rank = c->rank,
                                    .size = c->size,
                                    .comm_uid = c->uid,
                                    .node = node,
                                    .timeout_s = c->timeout_s};
    if (allowed == NULL)
        allowed = "";
    for (int i = 0; i < mesh_tl_count() && c->ntls < MESH_COMM_MAX_TLS; i++) {
        const mesh_tl_ops_t *ops = mesh_tl_get(i);
        int idx = mesh_route_net_index(r, ops->name);
        if (!tl_allowed(allowed, ops->name)) {
            skip(r, idx, ops->name, "excluded by MESH_TLS");
            continue;
        }
        if (known_net(ops->name) && idx < 0) {
            mesh_log_debug("transport %s skipped: not in MESH_NET", ops->name);
            continue;
        }
        if (known_net(ops->name) && strcmp(ops->name, "tcp") != 0 &&
            strcmp(ops->name, "verbs") != 0 && !r->explicit_net &&
            !tl_listed(allowed, ops->name, 0) && tl_allowed(allowed, "tcp") &&
            mesh_tl_find("tcp") != NULL && !mesh_tl_rdma_present()) {
            /* nothing but sockets under it here: not worth opening a library for */
            skip(r, idx, ops->name, "sockets only here (tcp preferred)");
            continue;
        }
        mesh_tl_set_unusable("");
        if (ops->usable && !ops->usable()) {
            const char *why = mesh_tl_unusable_reason();
            skip(r, idx, ops->name, *why ? why : "not usable here");
            continue;
        }
        mesh_comm_tl_t *t = &c->tls[c->ntls];
        mesh_status_t st = ops->open(&params, &t->iface);
        if (st < 0) {
            char why[128];
            snprintf(why, sizeof(why), "open failed: %s", mesh_error_last());
            if (idx < 0 && !known_net(ops->name))
                mesh_log_warn("transport %s failed to open (%s); continuing without it", ops->name,
                              mesh_status_string(st));
            else
                skip(r, idx, ops->name, why);
            continue;
        }
        ops->query(t->iface, &t->caps);
        if (t->caps.scope == MESH_TL_SCOPE_NET && idx < 0) {
            mesh_log_debug("transport %s skipped: not in MESH_NET", ops->name);
            ops->close(t->iface);
            t->iface = NULL;
            continue;
        }
        if (t->caps.scope != MESH_TL_SCOPE_NET && idx >= 0) {
            ops->close(t->iface);
            t->iface = NULL;
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "MESH_NET names %s, which is not a network transport", ops->name);
        }
        t->ops = ops;
        if (sockets_only_gives_way(r, allowed, t)) {
            ops->close(t->iface);
            t->iface = NULL;
            skip(r, idx, ops->name, "sockets only here (tcp preferred)");
            continue;
        }
        c->ntls++;
    }
    for (int i = 0; i < r->n; i++)
        if (mesh_tl_find(r->name[i]) == NULL)
            skip(r, i, r->name[i], "not built");
    return MESH_OK;
}

int mesh_route_better(const mesh_route_t *r, const mesh_comm_tl_t *a, const mesh_comm_tl_t *b)
{
    if (a->caps.scope != b->caps.scope)
        return a->caps.scope < b->caps.scope;
    if (a->caps.scope == MESH_TL_SCOPE_NET) {
        int ia = mesh_route_net_index(r, a->ops->name), ib = mesh_route_net_index(r, b->ops->name);
        if (ia != ib)
            return ia >= 0 && (ib < 0 || ia < ib);
    }
    return a->caps.priority > b->caps.priority;
}

void mesh_route_report(const mesh_comm_t *c, const mesh_route_t *r)
{
    char line[768];
    int chosen[MESH_ROUTE_NET_MAX] = {0}, nchosen = 0, first = MESH_ROUTE_NET_MAX;
    int me = c->node_of[c->rank];
    for (int p = 0; p < c->size; p++) {
        if (c->node_of[p] == me || c->peers[p].ep == NULL)
            continue;
        int i = mesh_route_net_index(r, c->tls[c->peers[p].tl].ops->name);
        if (i < 0 || chosen[i])
            continue;
        chosen[i] = 1;
        nchosen++;
        if (i < first)
            first = i;
    }
    size_t n = (size_t)snprintf(line, sizeof(line), "net: ");
    if (nchosen == 0) {
        mesh_log_debug("net: none needed (%d node%s)", c->nnodes, c->nnodes > 1 ? "s" : "");
        return;
    }
    for (int i = 0, k = 0; i < r->n && n < sizeof(line); i++)
        if (chosen[i])
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", k++ ? "+" : "", r->name[i]);
    int opened = 0;
    for (int i = 0; i < r->n && n < sizeof(line); i++) {
        if (chosen[i])
            continue;
        const char *why = r->why[i];
        if (!*why)
            why = i < first ? "not open on the other nodes" : "later in MESH_NET";
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s: %s", opened++ ? ", " : " (",
                              r->name[i], why);
    }
    if (opened && n < sizeof(line))
        snprintf(line + n, sizeof(line) - n, ")");
    if (c->rank == c->node_ranks[c->node_first[me]])
        mesh_log_info("%s", line);
    else
        mesh_log_debug("%s", line);
}

mesh_status_t mesh_comm_isend(mesh_comm_t *c, int peer, uint64_t tag, const void *buf, size_t len,
                              mesh_tl_op_t *op)
{
    mesh_comm_peer_t *p = &c->peers[peer];
    c->tls[p->tl].bytes_sent += len;
    return mesh_tl_isend(p->ep, tag, buf, len, op);
}

mesh_status_t mesh_comm_irecv(mesh_comm_t *c, int peer, uint64_t tag, void *buf, size_t len,
                              mesh_tl_op_t *op)
{
    mesh_comm_peer_t *p = &c->peers[peer];
    c->tls[p->tl].bytes_recv += len;
    return mesh_tl_irecv(p->ep, tag, buf, len, op);
}

mesh_status_t mesh_comm_check_peer(mesh_comm_t *c, int peer)
{
    mesh_comm_peer_t *p = &c->peers[peer];
    if (p->ep == NULL || c->tls[p->tl].ops->ep_check == NULL)
        return MESH_OK;
    return c->tls[p->tl].ops->ep_check(p->ep);
}

int mesh_comm_peer_gone(mesh_comm_t *c, int peer)
{
    return mesh_context_pid_gone(c->peers[peer].pid, c->peers[peer].pidns);
}
