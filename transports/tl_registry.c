/* The one table of transports built into this library, in no particular order: the
 * communicator asks each for its scope and priority and chooses per peer. */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "tl"
#include "transports/tl.h"
#include "transports/tl_registry.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <dirent.h>
#include <string.h>

static const mesh_tl_ops_t *const mesh_tl_table[] = {
    &mesh_tl_self_ops,  &mesh_tl_shm_ops, &mesh_tl_tcp_ops,
#if HAVE_VERBS
    &mesh_tl_verbs_ops,
#endif
#if HAVE_UCX
    &mesh_tl_ucx_ops,
#endif
#if HAVE_OFI
    &mesh_tl_ofi_ops,
#endif
};

#define MESH_TL_TABLE_SIZE ((int)(sizeof(mesh_tl_table) / sizeof(mesh_tl_table[0])))

int mesh_tl_count(void)
{
    return MESH_TL_TABLE_SIZE;
}

const mesh_tl_ops_t *mesh_tl_get(int index)
{
    if (index < 0 || index >= MESH_TL_TABLE_SIZE)
        return NULL;
    return mesh_tl_table[index];
}

const mesh_tl_ops_t *mesh_tl_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (int i = 0; i < MESH_TL_TABLE_SIZE; i++)
        if (strcmp(mesh_tl_table[i]->name, name) == 0)
            return mesh_tl_table[i];
    return NULL;
}

mesh_status_t mesh_tl_global_init(void)
{
    for (int i = 0; i < MESH_TL_TABLE_SIZE; i++) {
        if (mesh_tl_table[i]->config == NULL)
            continue;
        MESH_CHECK(mesh_config_register(mesh_tl_table[i]->config));
    }
    return MESH_OK;
}

static __thread char mesh_tl_unusable_why[160];

void mesh_tl_set_unusable(const char *why)
{
    snprintf(mesh_tl_unusable_why, sizeof(mesh_tl_unusable_why), "%s", why ? why : "");
}

const char *mesh_tl_unusable_reason(void)
{
    return mesh_tl_unusable_why;
}

int mesh_tl_rdma_present(void)
{
    /* verbs devices (InfiniBand, RoCE, iWARP, EFA) and HPE Slingshot's cxi */
    static const char *const classes[] = {"/sys/class/infiniband", "/sys/class/cxi"};
    int found = 0;
    for (unsigned i = 0; i < sizeof(classes) / sizeof(classes[0]) && !found; i++) {
        DIR *d = opendir(classes[i]);
        if (d == NULL)
            continue;
        struct dirent *e;
        while (!found && (e = readdir(d)) != NULL)
            found = e->d_name[0] != '.';
        closedir(d);
    }
    return found;
}
