/* Topology of this node: packages, NUMA domains, cores, GPUs, NICs and which NIC and CPUs sit
 * nearest each GPU in the PCI tree. Discovered with hwloc once per process, or loaded from a
 * saved hwloc XML file (MESH_TOPO_FILE), which is how tests describe machines they do not have. */
#ifndef MESH_TOPO_H
#define MESH_TOPO_H

#include "mesh.h"
#include <stdint.h>
#include <stdio.h>

#define MESH_TOPO_NAME_MAX   32  /* NIC names: "mlx5_0", "enp65s0f0np0" */
#define MESH_TOPO_CPUSET_MAX 128 /* cpu list text: "0-15,32-47" */

typedef enum {
    MESH_TOPO_NIC_ETH = 0, /* network device only (Ethernet, IPoIB without verbs) */
    MESH_TOPO_NIC_RDMA = 1 /* has a verbs device: InfiniBand or RoCE HCA */
} mesh_topo_nic_kind_t;

typedef struct {
    char name[MESH_TOPO_NAME_MAX];   /* the verbs device when there is one, else the netdev */
    char netdev[MESH_TOPO_NAME_MAX]; /* its network interface ("ib0", "eth0"); "" if none */
    char pci[16];                    /* "0000:17:00.0"; "" without a PCI device */
    mesh_topo_nic_kind_t kind;
    int numa; /* logical index of its NUMA domain; -1 unknown */
} mesh_topo_nic_t;

/* A set of CPUs (hwloc PU OS indexes) in the forms users and summaries need. */
typedef struct {
    char list[MESH_TOPO_CPUSET_MAX]; /* "0-15,32-47"; "" when unknown */
    int first, last, count;          /* -1, -1, 0 when unknown */
} mesh_topo_cpus_t;

typedef struct {
    char pci[16];          /* "0000:18:00.0" */
    char model[64];        /* from the driver or PCI ids; "" when unknown */
    char uuid[48];         /* "GPU-..." when hwloc read it through NVML; "" otherwise */
    int nic;               /* index of the nearest NIC; -1 when the node has none */
    int nic_hops;          /* PCI tree edges between the GPU and that NIC */
    int numa;              /* logical index of its NUMA domain; -1 unknown */
    mesh_topo_cpus_t cpus; /* CPUs local to the GPU */
} mesh_topo_gpu_t;

typedef struct mesh_topo mesh_topo_t;

/* Loads a topology: from an hwloc XML file when xml_path is non-NULL and non-empty, else by
 * discovering this machine (I/O devices included). */
mesh_status_t mesh_topo_load(const char *xml_path, mesh_topo_t **topo);
void mesh_topo_free(mesh_topo_t *topo);

/* The process's topology, loaded once (MESH_TOPO_FILE or discovery) and shared by every
 * communicator; later calls return the first result. */
mesh_status_t mesh_topo_get(const mesh_topo_t **topo);
/* Declares the topology knobs (MESH_TOPO_FILE, MESH_LOCAL_GPU); idempotent. */
mesh_status_t mesh_topo_config_register(void);

int mesh_topo_npackages(const mesh_topo_t *topo);
int mesh_topo_nnuma(const mesh_topo_t *topo);
int mesh_topo_ncores(const mesh_topo_t *topo);
int mesh_topo_npus(const mesh_topo_t *topo);
int mesh_topo_ngpus(const mesh_topo_t *topo);
int mesh_topo_nnics(const mesh_topo_t *topo);
/* GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID numbering); NULL when out of range. */
const mesh_topo_gpu_t *mesh_topo_gpu(const mesh_topo_t *topo, int index);
/* NICs in PCI bus order; NULL when out of range. */
const mesh_topo_nic_t *mesh_topo_nic(const mesh_topo_t *topo, int index);
/* Every CPU of the node. */
const mesh_topo_cpus_t *mesh_topo_node_cpus(const mesh_topo_t *topo);
/* The XML file it came from; NULL when discovered. */
const char *mesh_topo_source(const mesh_topo_t *topo);
/* The host name the topology records (that of the machine an XML file was saved on). */
const char *mesh_topo_host(const mesh_topo_t *topo);

/* This process's binding as a cpu list when it is bound to part of the node the topology
 * describes (a discovered one); returns 0 and "" otherwise. */
int mesh_topo_bound_cpus(const mesh_topo_t *topo, char *list, size_t len);

/* Writes the topology as hwloc XML (what lstopo --input and MESH_TOPO_FILE read). */
mesh_status_t mesh_topo_export(const mesh_topo_t *topo, const char *path);
/* Human-readable description, as mesh-info --topo prints it. */
void mesh_topo_print(const mesh_topo_t *topo, const char *node, FILE *out);

/* What every rank tells the others about itself when a communicator is created. */
typedef struct mesh_topo_summary {
    int32_t gpu;                 /* GPU index on its node; -1 none */
    int32_t cpu_first, cpu_last; /* PU OS indexes; -1 unknown */
    int32_t cpu_count;
    char nic[MESH_TOPO_NAME_MAX]; /* nearest NIC of its GPU (or of the node); "" none */
} mesh_topo_summary_t;

/*
 * This process's summary, resolved once and then fixed for every communicator. local_rank is
 * the rank's place on its node, used only when neither MESH_LOCAL_GPU nor CUDA_VISIBLE_DEVICES
 * pick the GPU and no launcher said which local rank this process is.
 */
mesh_status_t mesh_topo_summary(int local_rank, mesh_topo_summary_t *out);
/* The GPU rule alone, for a given topology and environment (tests drive it directly):
 * MESH_LOCAL_GPU, else CUDA_VISIBLE_DEVICES entry local_rank % entries, else local_rank %
 * GPUs. */
int mesh_topo_pick_gpu(const mesh_topo_t *topo, int local_rank, long long local_gpu,
                       const char *visible);
/* Fills a summary for a given GPU (-1 none) on topo; bound is the process's binding as a cpu
 * list ("" or NULL: unbound). */
void mesh_topo_fill_summary(const mesh_topo_t *topo, int gpu, const char *bound,
                            mesh_topo_summary_t *out);

#endif
