/* Topology discovery with hwloc: counts, GPUs, NICs and PCI distances between them. */
#define MESH_LOG_SUBSYSTEM "topo"
#include "libmesh/topo.h"
#include "libmesh/log.h"

#include <hwloc.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MESH_TOPO_PCI_VENDOR_NVIDIA 0x10de

struct mesh_topo {
    hwloc_topology_t hw;
    char *source;
    char host[256];
    int npackages, nnuma, ncores, npus;
    int ngpus, nnics;
    mesh_topo_gpu_t *gpus;
    mesh_topo_nic_t *nics;
    hwloc_obj_t *nic_objs; /* [nnics] the PCI device (or the OS device without one) */
    mesh_topo_cpus_t cpus;
};

static void topo_cpus(hwloc_const_cpuset_t set, mesh_topo_cpus_t *out)
{
    out->list[0] = '\0';
    out->first = out->last = -1;
    out->count = 0;
    if (set == NULL || hwloc_bitmap_iszero(set))
        return;
    hwloc_bitmap_list_snprintf(out->list, sizeof(out->list), set);
    out->first = hwloc_bitmap_first(set);
    out->last = hwloc_bitmap_last(set);
    out->count = hwloc_bitmap_weight(set);
}

static int topo_numa_of(hwloc_topology_t hw, hwloc_obj_t obj)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, obj);
    if (anc == NULL || anc->nodeset == NULL || hwloc_bitmap_iszero(anc->nodeset))
        return -1;
    /* the first NUMA domain whose node number the ancestor's nodeset holds */
    for (hwloc_obj_t n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, NULL); n;
         n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, n))
        if (hwloc_bitmap_isset(anc->nodeset, n->os_index))
            return (int)n->logical_index;
    return -1;
}

static void topo_busid(hwloc_obj_t pci, char *out, size_t len)
{
    snprintf(out, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static int topo_is_gpu(hwloc_obj_t pci)
{
    /* display controllers (VGA 0x0300, 3D 0x0302, other 0x0380) of NVIDIA; NVSwitches and
     * the audio functions of PCIe boards share the vendor but not the class */
    return pci->attr->pcidev.vendor_id == MESH_TOPO_PCI_VENDOR_NVIDIA &&
           (pci->attr->pcidev.class_id >> 8) == 0x03;
}

static int topo_depth(hwloc_obj_t obj)
{
    int d = 0;
    for (; obj->parent; obj = obj->parent)
        d++;
    return d;
}

/* Edges between two objects in the tree (through their deepest common ancestor). */
static int topo_hops(hwloc_obj_t a, hwloc_obj_t b)
{
    int da = topo_depth(a), db = topo_depth(b), hops = 0;
    while (da > db) {
        a = a->parent;
        da--;
        hops++;
    }
    while (db > da) {
        b = b->parent;
        db--;
        hops++;
    }
    while (a != b) {
        a = a->parent;
        b = b->parent;
        hops += 2;
    }
    return hops;
}

static hwloc_obj_t topo_pci_parent(hwloc_obj_t osdev)
{
    hwloc_obj_t p = osdev->parent;
    return p && p->type == HWLOC_OBJ_PCI_DEVICE ? p : NULL;
}

/* One NIC per PCI function: its verbs device names it, its netdev comes second. */
static mesh_status_t topo_find_nics(mesh_topo_t *t)
{
    int cap = 0;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t->hw, NULL); o; o = hwloc_get_next_osdev(t->hw, o))
        cap++;
    t->nics = calloc((size_t)cap + 1, sizeof(*t->nics));
    t->nic_objs = calloc((size_t)cap + 1, sizeof(*t->nic_objs));
    if (t->nics == NULL || t->nic_objs == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %d nic records", cap);
    for (hwloc_obj_t o = hwloc_get_next_osdev(t->hw, NULL); o; o = hwloc_get_next_osdev(t->hw, o)) {
        hwloc_obj_osdev_type_t type = o->attr->osdev.type;
        if ((type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) ||
            o->name == NULL)
            continue;
        hwloc_obj_t pci = topo_pci_parent(o);
        hwloc_obj_t key = pci ? pci : o;
        int i;
        for (i = 0; i < t->nnics; i++)
            if (t->nic_objs[i] == key)
                break;
        mesh_topo_nic_t *n = &t->nics[i];
        if (i == t->nnics) {
            t->nic_objs[t->nnics++] = key;
            n->numa = topo_numa_of(t->hw, o);
            if (pci)
                topo_busid(pci, n->pci, sizeof(n->pci));
        }
        if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            n->kind = MESH_TOPO_NIC_RDMA;
            snprintf(n->name, sizeof(n->name), "%s", o->name);
        } else {
            if (n->netdev[0] == '\0')
                snprintf(n->netdev, sizeof(n->netdev), "%s", o->name);
            if (n->kind != MESH_TOPO_NIC_RDMA)
                snprintf(n->name, sizeof(n->name), "%s", o->name);
        }
    }
    return MESH_OK;
}

/* Model and UUID from the OS devices that hwloc's NVML or CUDA backends attach, else the
 * model from the PCI ids. */
static void topo_gpu_names(hwloc_obj_t pci, mesh_topo_gpu_t *g)
{
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        const char *m = hwloc_obj_get_info_by_name(c, "GPUModel");
        const char *u = hwloc_obj_get_info_by_name(c, "NVIDIAUUID");
        if (m && !g->model[0])
            snprintf(g->model, sizeof(g->model), "%s", m);
        if (u && !g->uuid[0])
            snprintf(g->uuid, sizeof(g->uuid), "%s", u);
    }
    const char *d = hwloc_obj_get_info_by_name(pci, "PCIDevice");
    if (d && !g->model[0])
        snprintf(g->model, sizeof(g->model), "%s", d);
}

/* The nearest NIC: RDMA-capable ones first when the node has any (collectives need them more
 * than they need a short path to a management port), then fewest PCI hops, then PCI order. */
static void topo_nearest_nic(mesh_topo_t *t, hwloc_obj_t gpu, mesh_topo_gpu_t *g)
{
    int rdma = 0;
    for (int i = 0; i < t->nnics; i++)
        rdma |= t->nics[i].kind == MESH_TOPO_NIC_RDMA;
    g->nic = -1;
    g->nic_hops = INT_MAX;
    for (int i = 0; i < t->nnics; i++) {
        if (rdma && t->nics[i].kind != MESH_TOPO_NIC_RDMA)
            continue;
        int h = topo_hops(gpu, t->nic_objs[i]);
        if (h < g->nic_hops) {
            g->nic = i;
            g->nic_hops = h;
        }
    }
    if (g->nic < 0)
        g->nic_hops = -1;
}

static mesh_status_t topo_find_gpus(mesh_topo_t *t)
{
    int cap = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t->hw, NULL); o; o = hwloc_get_next_pcidev(t->hw, o))
        cap++;
    t->gpus = calloc((size_t)cap + 1, sizeof(*t->gpus));
    if (t->gpus == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %d gpus", cap);
    /* hwloc lists PCI devices in bus order, which is the numbering nvidia-smi shows */
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t->hw, NULL); o;
         o = hwloc_get_next_pcidev(t->hw, o)) {
        if (!topo_is_gpu(o))
            continue;
        mesh_topo_gpu_t *g = &t->gpus[t->ngpus++];
        topo_busid(o, g->pci, sizeof(g->pci));
        topo_gpu_names(o, g);
        g->numa = topo_numa_of(t->hw, o);
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t->hw, o);
        topo_cpus(anc ? anc->cpuset : NULL, &g->cpus);
        topo_nearest_nic(t, o, g);
    }
    return MESH_OK;
}

static mesh_status_t topo_open(const char *xml_path, hwloc_topology_t *out)
{
    hwloc_topology_t hw;
    if (hwloc_topology_init(&hw) != 0)
        return mesh_error(MESH_ERR_INTERNAL, "hwloc_topology_init failed: %m");
    /* I/O objects are dropped by default; a saved file keeps all it holds, discovery keeps
     * the devices that matter (GPUs, NICs, storage) and the bridges above them */
    int xml = xml_path && *xml_path;
    hwloc_topology_set_io_types_filter(hw, xml ? HWLOC_TYPE_FILTER_KEEP_ALL
                                               : HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (xml && hwloc_topology_set_xml(hw, xml_path) != 0) {
        hwloc_topology_destroy(hw);
        return mesh_error(MESH_ERR_INVALID_ARG, "cannot read topology file '%s': %m", xml_path);
    }
    if (hwloc_topology_load(hw) != 0) {
        hwloc_topology_destroy(hw);
        if (xml)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "cannot load topology file '%s' (not hwloc "
                              "XML?): %m",
                              xml_path);
        return mesh_error(MESH_ERR_INTERNAL, "hwloc cannot discover this machine: %m");
    }
    *out = hw;
    return MESH_OK;
}

mesh_status_t mesh_topo_load(const char *xml_path, mesh_topo_t **out)
{
    mesh_topo_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a topology");
    mesh_status_t st = topo_open(xml_path, &t->hw);
    if (st != MESH_OK) {
        free(t);
        return st;
    }
    if (xml_path && *xml_path && (t->source = strdup(xml_path)) == NULL) {
        mesh_topo_free(t);
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot copy a file name");
    }
    hwloc_obj_t root = hwloc_get_root_obj(t->hw);
    const char *host = hwloc_obj_get_info_by_name(root, "HostName");
    snprintf(t->host, sizeof(t->host), "%s", host ? host : "");
    t->npackages = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PACKAGE);
    t->nnuma = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE);
    t->ncores = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_CORE);
    t->npus = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU);
    topo_cpus(root->cpuset, &t->cpus);
    st = topo_find_nics(t);
    if (st == MESH_OK)
        st = topo_find_gpus(t);
    if (st != MESH_OK) {
        mesh_topo_free(t);
        return st;
    }
    mesh_log_debug("topology %s: %d package(s), %d numa, %d core(s), %d gpu(s), %d nic(s)",
                   t->source ? t->source : "discovered", t->npackages, t->nnuma, t->ncores,
                   t->ngpus, t->nnics);
    *out = t;
    return MESH_OK;
}

void mesh_topo_free(mesh_topo_t *t)
{
    if (t == NULL)
        return;
    if (t->hw)
        hwloc_topology_destroy(t->hw);
    free(t->source);
    free(t->gpus);
    free(t->nics);
    free(t->nic_objs);
    free(t);
}

mesh_status_t mesh_topo_export(const mesh_topo_t *t, const char *path)
{
    if (t == NULL || path == NULL || !*path)
        return mesh_error(MESH_ERR_INVALID_ARG, "topology export: no topology or file name");
    if (hwloc_topology_export_xml(t->hw, path, 0) != 0)
        return mesh_error(MESH_ERR_IO, "cannot write topology file '%s': %m", path);
    return MESH_OK;
}

int mesh_topo_npackages(const mesh_topo_t *t)
{
    return t->npackages;
}
int mesh_topo_nnuma(const mesh_topo_t *t)
{
    return t->nnuma;
}
int mesh_topo_ncores(const mesh_topo_t *t)
{
    return t->ncores;
}
int mesh_topo_npus(const mesh_topo_t *t)
{
    return t->npus;
}
int mesh_topo_ngpus(const mesh_topo_t *t)
{
    return t->ngpus;
}
int mesh_topo_nnics(const mesh_topo_t *t)
{
    return t->nnics;
}
const mesh_topo_cpus_t *mesh_topo_node_cpus(const mesh_topo_t *t)
{
    return &t->cpus;
}
const char *mesh_topo_source(const mesh_topo_t *t)
{
    return t->source;
}
const char *mesh_topo_host(const mesh_topo_t *t)
{
    return t->host;
}

const mesh_topo_gpu_t *mesh_topo_gpu(const mesh_topo_t *t, int i)
{
    return i >= 0 && i < t->ngpus ? &t->gpus[i] : NULL;
}

const mesh_topo_nic_t *mesh_topo_nic(const mesh_topo_t *t, int i)
{
    return i >= 0 && i < t->nnics ? &t->nics[i] : NULL;
}

int mesh_topo_bound_cpus(const mesh_topo_t *t, char *list, size_t len)
{
    list[0] = '\0';
    /* a binding only means something on the machine the topology describes */
    if (t->source != NULL || !hwloc_topology_is_thissystem(t->hw))
        return 0;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int bound = 0;
    if (set && hwloc_get_cpubind(t->hw, set, HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(t->hw);
        hwloc_bitmap_and(set, set, all);
        if (!hwloc_bitmap_iszero(set) && !hwloc_bitmap_isequal(set, all)) {
            hwloc_bitmap_list_snprintf(list, len, set);
            bound = 1;
        }
    }
    hwloc_bitmap_free(set);
    return bound;
}

void mesh_topo_fill_summary(const mesh_topo_t *t, int gpu, const char *bound,
                            mesh_topo_summary_t *out)
{
    memset(out, 0, sizeof(*out));
    out->gpu = -1;
    const mesh_topo_gpu_t *g = mesh_topo_gpu(t, gpu);
    const mesh_topo_cpus_t *cpus = &t->cpus;
    mesh_topo_cpus_t b;
    if (g) {
        out->gpu = gpu;
        cpus = &g->cpus;
    }
    if (bound && *bound) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        if (set && hwloc_bitmap_list_sscanf(set, bound) == 0) {
            topo_cpus(set, &b);
            cpus = &b;
        }
        hwloc_bitmap_free(set);
    }
    out->cpu_first = cpus->first;
    out->cpu_last = cpus->last;
    out->cpu_count = cpus->count;
    /* without a GPU, the first NIC of the preferred kind stands for the node's */
    const mesh_topo_nic_t *n = NULL;
    if (g) {
        n = mesh_topo_nic(t, g->nic);
    } else {
        for (int i = 0; i < t->nnics; i++)
            if (n == NULL ||
                (t->nics[i].kind == MESH_TOPO_NIC_RDMA && n->kind != MESH_TOPO_NIC_RDMA))
                n = &t->nics[i];
    }
    if (n)
        snprintf(out->nic, sizeof(out->nic), "%s", n->name);
}
