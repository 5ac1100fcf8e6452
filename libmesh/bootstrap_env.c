/*
 * Bootstrap from the launcher's environment, tried in this order:
 *   1. MESH_RANK, MESH_SIZE, MESH_ADDR (meshrun, or by hand);
 *   2. torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: rank 0 listens on
 *      MASTER_PORT + MESH_BOOTSTRAP_PORT_OFFSET, since torch's own store may hold MASTER_PORT;
 *   3. PMIx (mpirun, srun --mpi=pmix) when built with it and PMIX_RANK is set.
 * The first two use the TCP star around rank 0, which listens on the given address (or on every
 * address when the given one is not on its host, e.g. behind NAT or a DNS alias).
 */
#define MESH_LOG_SUBSYSTEM "bootstrap"
#include <config.h>
#include "libmesh/bootstrap.h"
#include "libmesh/config.h"
#include "libmesh/log.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const mesh_config_entry_t bootstrap_entries[] = {
    {"RANK", "-1", MESH_CFG_INT,
     "Rank of this process (0..MESH_SIZE-1) for mesh_comm_init_env; -1: not set.", NULL, "-1.."},
    {"SIZE", "0", MESH_CFG_INT, "Number of ranks for mesh_comm_init_env; 0: not set.", NULL, "0.."},
    {"ADDR", "", MESH_CFG_STRING,
     "host:port (or [v6]:port) where rank 0's bootstrap listens, for mesh_comm_init_env."},
    {"SECRET", "", MESH_CFG_STRING,
     "Shared secret every rank of mesh_comm_init_env presents (any text, e.g. random hex). "
     "Unset: a hash of MESH_ADDR and MESH_SIZE, which keeps stray jobs apart but is no "
     "protection against a hostile peer."},
    {"LOCAL_RANK", "-1", MESH_CFG_INT,
     "Rank within its node, set by meshrun for the program's use; mesh derives its own from the "
     "node map.",
     NULL, "-1.."},
    {"LOCAL_SIZE", "0", MESH_CFG_INT, "Ranks on this node, set by meshrun for the program's use.",
     NULL, "0.."},
    {"BOOTSTRAP_PORT_OFFSET", "1", MESH_CFG_INT,
     "Under torchrun, rank 0 listens on MASTER_PORT plus this offset (torch's own store may "
     "already listen on MASTER_PORT).",
     NULL, "0..65535"},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t bootstrap_table = {"bootstrap", bootstrap_entries};

mesh_status_t mesh_bootstrap_config_register(void)
{
    return mesh_config_register(&bootstrap_table);
}

/* 32 bytes from text: four FNV-1a lanes with distinct seeds, each finished by a 64-bit mixer.
 * Not a cryptographic hash: the default secret only keeps unrelated jobs apart. */
static void hash32(const char *text, uint8_t out[32])
{
    for (int lane = 0; lane < 4; lane++) {
        uint64_t h = 0xcbf29ce484222325ull ^ (0x9e3779b97f4a7c15ull * (uint64_t)(lane + 1));
        for (const char *p = text; *p; p++) {
            h ^= (uint8_t)*p;
            h *= 0x100000001b3ull;
        }
        h ^= h >> 30;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 27;
        h *= 0x94d049bb133111ebull;
        h ^= h >> 31;
        memcpy(out + 8 * lane, &h, 8);
    }
}

static int parse_int(const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno)
        return -1;
    *out = v;
    return 0;
}

static mesh_status_t env_star(int rank, int size, const char *addr_text, const char *secret_text,
                              const char *source, double timeout_s, mesh_bootstrap_t **bs)
{
    mesh_sockaddr_t addr;
    uint8_t secret[32];
    char buf[300];
    int lfd = -1;

    if (size < 1 || rank < 0 || rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: rank %d is not in 0..%d", source, rank,
                          size - 1);
    MESH_CHECK(mesh_sock_parse_addr(addr_text, &addr));
    if (secret_text != NULL && *secret_text != '\0') {
        hash32(secret_text, secret);
    } else {
        snprintf(buf, sizeof(buf), "mesh-bootstrap|%s|%d", addr_text, size);
        hash32(buf, secret);
    }
    if (rank == 0) {
        mesh_sockaddr_t bind_to = addr;
        if (!mesh_sock_addr_is_local(&addr)) {
            if (addr.ss.ss_family == AF_INET) {
                ((struct sockaddr_in *)&bind_to.ss)->sin_addr.s_addr = htonl(INADDR_ANY);
            } else {
                ((struct sockaddr_in6 *)&bind_to.ss)->sin6_addr = in6addr_any;
            }
            mesh_log_info("%s: %s is not an address of this host; rank 0 listens on every address",
                          source, addr_text);
        }
        MESH_CHECK(mesh_sock_listen(&bind_to, 128, &lfd, NULL));
    }
    return mesh_bootstrap_star_create(rank, size, timeout_s, secret, lfd, &addr, bs);
}

/* "not set", or what is wrong with the value it is set to */
static mesh_status_t env_bad(const char *group, const char *var, const char *why)
{
    const char *v = getenv(var);
    if (v == NULL || *v == '\0')
        return mesh_error(MESH_ERR_INVALID_ARG, "%s go together; %s is not set", group, var);
    return mesh_error(MESH_ERR_INVALID_ARG, "%s=%s %s", var, v, why);
}

static mesh_status_t env_from_mesh(double timeout_s, mesh_bootstrap_t **bs)
{
    static const char group[] = "MESH_RANK, MESH_SIZE and MESH_ADDR";
    long long rank = mesh_config_int("RANK"), size = mesh_config_int("SIZE");
    const char *addr = mesh_config_str("ADDR");
    if (rank < 0)
        return env_bad(group, "MESH_RANK", "is not a rank (0..MESH_SIZE-1)");
    if (size <= 0)
        return env_bad(group, "MESH_SIZE", "must be at least 1");
    if (addr == NULL || *addr == '\0')
        return env_bad(group, "MESH_ADDR", "is empty");
    if (size > 1 << 24)
        return mesh_error(MESH_ERR_INVALID_ARG, "MESH_SIZE=%lld is too large (at most %d)", size,
                          1 << 24);
    if (rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG, "MESH_RANK=%lld is not below MESH_SIZE=%lld", rank,
                          size);
    return env_star((int)rank, (int)size, addr, mesh_config_str("SECRET"),
                    "MESH_RANK/MESH_SIZE/MESH_ADDR", timeout_s, bs);
}

static mesh_status_t env_from_torch(double timeout_s, mesh_bootstrap_t **bs)
{
    const char *names[4] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
    const char *v[4];
    long rank, size, port;
    char addr[300];

    for (int i = 0; i < 4; i++) {
        v[i] = getenv(names[i]);
        if (v[i] == NULL || *v[i] == '\0')
            return mesh_error(MESH_ERR_INVALID_ARG, "torchrun variables: %s is not set", names[i]);
    }
    if (parse_int(v[1], &size) || size < 1 || size > 1 << 24)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "torchrun variables: WORLD_SIZE=%s is not a "
                          "number of ranks (1..%d)",
                          v[1], 1 << 24);
    if (parse_int(v[0], &rank) || rank < 0 || rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "torchrun variables: RANK=%s is not a rank "
                          "(0..%ld)",
                          v[0], size - 1);
    if (parse_int(v[3], &port) || port < 0 || port > 65535)
        return mesh_error(MESH_ERR_INVALID_ARG, "torchrun variables: MASTER_PORT=%s is not a port",
                          v[3]);
    port += mesh_config_int("BOOTSTRAP_PORT_OFFSET");
    if (port < 1 || port > 65535)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "MASTER_PORT=%s plus MESH_BOOTSTRAP_PORT_OFFSET "
                          "is not a port",
                          v[3]);
    /* A bare IPv6 address needs brackets before the port. */
    snprintf(addr, sizeof(addr), strchr(v[2], ':') && v[2][0] != '[' ? "[%s]:%ld" : "%s:%ld", v[2],
             port);
    return env_star((int)rank, (int)size, addr, mesh_config_str("SECRET"),
                    "torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT", timeout_s, bs);
}

mesh_status_t mesh_bootstrap_env_create(double timeout_s, mesh_bootstrap_t **bs)
{
    MESH_CHECK(mesh_bootstrap_config_register());
    const char *addr = mesh_config_str("ADDR");
    if (mesh_config_int("RANK") >= 0 || mesh_config_int("SIZE") > 0 || (addr && *addr))
        return env_from_mesh(timeout_s, bs);
    if (getenv("RANK") != NULL || getenv("WORLD_SIZE") != NULL)
        return env_from_torch(timeout_s, bs);
#if HAVE_PMIX
    if (getenv("PMIX_RANK") != NULL)
        return mesh_bootstrap_pmix_create(timeout_s, bs);
#endif
    return mesh_error(MESH_ERR_NOT_FOUND,
                      "no launcher found: set MESH_RANK, MESH_SIZE and "
                      "MESH_ADDR, or torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT%s",
                      HAVE_PMIX ? ", or run under a PMIx launcher (PMIX_RANK)" : "");
}
