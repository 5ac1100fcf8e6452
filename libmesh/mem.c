/* Memory kinds: which device table, if any, owns a pointer. The tables are initialised once;
 * where none is active (a CPU-only build, no driver, no emulation) every query answers host
 * memory after one load, with no call into any table and no syscall. */
#define MESH_LOG_SUBSYSTEM "mem"
#include <config.h> /* the generated one (libmesh/config.h is the knobs' tables) */
#include "libmesh/mem.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static const mesh_config_entry_t mesh_mem_entries[] = {
    {.name = "DEVICE_EMU",
     .dflt = "no",
     .type = MESH_CFG_BOOL,
     .doc = "Enables the emulated device (table \"emu\"): host memory from its allocator counts "
            "as device memory, its streams are threads running their work in order. A test "
            "instrument for the GPU path's host logic on machines without a GPU."},
    {.name = "DEVICE_EMU_DELAY_US",
     .dflt = "0",
     .type = MESH_CFG_INT,
     .range = "0..1000000",
     .doc = "Microseconds each operation of an emulated stream waits before it runs, so that "
            "work that is not ordered on its stream reads or writes stale data and tests see it."},
    {.name = "DEVICE_EMU_DEVICE",
     .dflt = "0",
     .type = MESH_CFG_INT,
     .range = "0..1023",
     .doc = "The emulated device a thread uses (its current device) until it chooses another."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_mem_config = {"mem", mesh_mem_entries};

mesh_status_t mesh_mem_config_register(void)
{
#if HAVE_CUDA
    MESH_CHECK(mesh_mem_cuda_config_register());
#endif
    return mesh_config_register(&mesh_mem_config);
}

#define MEM_MAX_TABLES 4
static const mesh_mem_ops_t *mem_active[MEM_MAX_TABLES]; /* init succeeded, in query order */
static int mem_nactive;
/* tables that recognise their memory without being usable (MESH_DEVICE_EMU off while the
 * emulated allocator is used): their buffers are refused, not taken for host memory */
static const mesh_mem_ops_t *_Atomic mem_detect_only;
static pthread_once_t mem_once = PTHREAD_ONCE_INIT;
int mesh_mem_state_;

static void mem_add(const mesh_mem_ops_t *ops)
{
    mesh_status_t st = ops->init();
    if (st == MESH_OK && mem_nactive < MEM_MAX_TABLES) {
        mem_active[mem_nactive++] = ops;
        mesh_log_debug("device table %s is active", ops->name);
    } else {
        mesh_log_debug("device table %s is not usable: %s", ops->name, mesh_error_last());
        mesh_error_clear();
    }
}

static void mem_do_init(void)
{
    int emu = mesh_mem_config_register() == MESH_OK && mesh_config_bool("DEVICE_EMU");
#if HAVE_CUDA
    mem_add(&mesh_mem_cuda_ops);
#endif
    if (emu)
        mem_add(&mesh_mem_emu_ops);
    int state = mem_nactive > 0 || atomic_load(&mem_detect_only) != NULL ? MESH_MEM_STATE_TABLES
                                                                         : MESH_MEM_STATE_HOST;
    __atomic_store_n(&mesh_mem_state_, state, __ATOMIC_RELEASE);
}

void mesh_mem_init(void)
{
    pthread_once(&mem_once, mem_do_init);
}

void mesh_mem_detect_only(const mesh_mem_ops_t *ops)
{
    mesh_mem_init();
    for (int i = 0; i < mem_nactive; i++)
        if (mem_active[i] == ops)
            return;
    atomic_store(&mem_detect_only, ops);
    __atomic_store_n(&mesh_mem_state_, MESH_MEM_STATE_TABLES, __ATOMIC_RELEASE);
}

int mesh_mem_table_active(const mesh_mem_ops_t *ops)
{
    mesh_mem_init();
    for (int i = 0; i < mem_nactive; i++)
        if (mem_active[i] == ops)
            return 1;
    return 0;
}

static void mem_host(mesh_mem_info_t *info)
{
    *info = (mesh_mem_info_t){.kind = MESH_MEM_HOST, .device = -1};
}

mesh_status_t mesh_mem_query(const void *ptr, mesh_mem_info_t *info)
{
    if (__atomic_load_n(&mesh_mem_state_, __ATOMIC_ACQUIRE) == MESH_MEM_STATE_HOST || ptr == NULL) {
        mem_host(info);
        return MESH_OK;
    }
    mesh_mem_init();
    for (int i = 0; i < mem_nactive; i++) {
        MESH_CHECK(mem_active[i]->query(ptr, info));
        if (info->kind != MESH_MEM_HOST)
            return MESH_OK;
    }
    const mesh_mem_ops_t *d = atomic_load(&mem_detect_only);
    if (d != NULL) {
        MESH_CHECK(d->query(ptr, info));
        if (info->kind != MESH_MEM_HOST)
            return MESH_OK;
    }
    mem_host(info);
    return MESH_OK;
}

const mesh_mem_ops_t *mesh_mem_table(const char *name)
{
    mesh_mem_init();
    for (int i = 0; i < mem_nactive; i++)
        if (name == NULL || strcmp(mem_active[i]->name, name) == 0)
            return mem_active[i];
    return NULL;
}
