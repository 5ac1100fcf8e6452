/* Topology from the fixtures in tests/fixtures/topo: counts, nearest NIC and CPUs of every GPU,
 * the GPU rule of a rank, and the summary a rank shares. */
#define _GNU_SOURCE /* CPU_SET and sched_setaffinity */
#include "tests/harness/harness.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/topo.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fixture_dir[1024];

static const char *fixture(const char *name)
{
    static char path[1100];
    snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
    return path;
}

static mesh_topo_t *load(const char *name)
{
    mesh_topo_t *t = NULL;
    mesh_status_t st = mesh_topo_load(fixture(name), &t);
    CHECK_MSG(st == MESH_OK, "%s: %s", fixture(name), mesh_status_string(st));
    return t;
}

static void check_counts(const mesh_topo_t *t, int pkg, int numa, int cores, int pus, int gpus,
                         int nics)
{
    CHECK_MSG(mesh_topo_npackages(t) == pkg, "packages %d", mesh_topo_npackages(t));
    CHECK_MSG(mesh_topo_nnuma(t) == numa, "numa %d", mesh_topo_nnuma(t));
    CHECK_MSG(mesh_topo_ncores(t) == cores, "cores %d", mesh_topo_ncores(t));
    CHECK_MSG(mesh_topo_npus(t) == pus, "pus %d", mesh_topo_npus(t));
    CHECK_MSG(mesh_topo_ngpus(t) == gpus, "gpus %d", mesh_topo_ngpus(t));
    CHECK_MSG(mesh_topo_nnics(t) == nics, "nics %d", mesh_topo_nnics(t));
}

static void check_gpu(const mesh_topo_t *t, int i, const char *pci, const char *nic, int hops,
                      const char *cpus, int first, int last, int count, int numa)
{
    const mesh_topo_gpu_t *g = mesh_topo_gpu(t, i);
    CHECK_MSG(g != NULL, "gpu %d missing", i);
    const mesh_topo_nic_t *n = mesh_topo_nic(t, g->nic);
    CHECK_MSG(strcmp(g->pci, pci) == 0, "gpu %d at %s", i, g->pci);
    CHECK_MSG(n != NULL && strcmp(n->name, nic) == 0, "gpu %d nearest nic %s", i,
              n ? n->name : "none");
    CHECK_MSG(g->nic_hops == hops, "gpu %d: %d hops to %s", i, g->nic_hops, nic);
    CHECK_MSG(strcmp(g->cpus.list, cpus) == 0, "gpu %d cpus '%s'", i, g->cpus.list);
    CHECK_MSG(g->cpus.first == first && g->cpus.last == last && g->cpus.count == count,
              "gpu %d cpus %d-%d (%d)", i, g->cpus.first, g->cpus.last, g->cpus.count);
    CHECK_MSG(g->numa == numa, "gpu %d numa %d", i, g->numa);
}

static void test_dgx8(void)
{
    mesh_topo_t *t = load("dgx8.xml");
    /* the four NVSwitches are NVIDIA devices but no GPUs */
    check_counts(t, 2, 2, 32, 32, 8, 8);
    static const char *const pci[8] = {"0000:11:00.0", "0000:21:00.0", "0000:31:00.0",
                                       "0000:41:00.0", "0000:91:00.0", "0000:a1:00.0",
                                       "0000:b1:00.0", "0000:c1:00.0"};
    for (int i = 0; i < 8; i++) {
        char nic[16];
        snprintf(nic, sizeof(nic), "mlx5_%d", i);
        /* GPU and HCA behind the same switch: up two bridges, down two */
        if (i < 4)
            check_gpu(t, i, pci[i], nic, 4, "0-15", 0, 15, 16, 0);
        else
            check_gpu(t, i, pci[i], nic, 4, "16-31", 16, 31, 16, 1);
        CHECK(strcmp(mesh_topo_gpu(t, i)->model, "NVIDIA H100 80GB HBM3") == 0);
        const mesh_topo_nic_t *n = mesh_topo_nic(t, i);
        char ib[16];
        snprintf(ib, sizeof(ib), "ib%d", i);
        CHECK_MSG(strcmp(n->name, nic) == 0 && strcmp(n->netdev, ib) == 0, "nic %d: %s %s", i,
                  n->name, n->netdev);
        CHECK(n->kind == MESH_TOPO_NIC_RDMA);
        CHECK_MSG(n->numa == i / 4, "nic %d numa %d", i, n->numa);
    }
    CHECK(mesh_topo_gpu(t, 8) == NULL && mesh_topo_nic(t, 8) == NULL);
    CHECK(strcmp(mesh_topo_host(t), "gpu-a") == 0);
    CHECK(strcmp(mesh_topo_node_cpus(t)->list, "0-31") == 0);

    /* the summary of a rank on GPU 5 (or with a binding) */
    mesh_topo_summary_t s;
    mesh_topo_fill_summary(t, 5, NULL, &s);
    CHECK(s.gpu == 5 && s.cpu_first == 16 && s.cpu_last == 31 && s.cpu_count == 16);
    CHECK(strcmp(s.nic, "mlx5_5") == 0);
    mesh_topo_fill_summary(t, 2, "4-7", &s);
    CHECK(s.gpu == 2 && s.cpu_first == 4 && s.cpu_last == 7 && s.cpu_count == 4);
    CHECK(strcmp(s.nic, "mlx5_2") == 0);

    /* the GPU rule: MESH_LOCAL_GPU, then CUDA_VISIBLE_DEVICES, then local rank % GPUs */
    CHECK(mesh_topo_pick_gpu(t, 3, -1, NULL) == 3);
    CHECK(mesh_topo_pick_gpu(t, 11, -1, NULL) == 3);
    CHECK(mesh_topo_pick_gpu(t, 3, 6, NULL) == 6);
    CHECK(mesh_topo_pick_gpu(t, 3, 6, "1") == 6);
    CHECK(mesh_topo_pick_gpu(t, 3, 9, NULL) == 3); /* out of range: ignored */
    CHECK(mesh_topo_pick_gpu(t, 0, -1, "5") == 5);
    CHECK(mesh_topo_pick_gpu(t, 1, -1, "4,5,6") == 5);
    CHECK(mesh_topo_pick_gpu(t, 4, -1, "4,5,6") == 5);
    CHECK(mesh_topo_pick_gpu(t, 2, -1, "") == -1);
    CHECK(mesh_topo_pick_gpu(t, 2, -1, "-1") == -1);
    /* UUIDs and unique prefixes, as hwloc read them through NVML */
    CHECK(strcmp(mesh_topo_gpu(t, 5)->uuid, "GPU-5c1a0e05-7d2b-4c9e-9f3a-0b1c2d3e4f05") == 0);
    CHECK(mesh_topo_pick_gpu(t, 0, -1, "GPU-5c1a0e05-7d2b-4c9e-9f3a-0b1c2d3e4f05") == 5);
    CHECK(mesh_topo_pick_gpu(t, 1, -1, "GPU-5c1a0e06,GPU-5c1a0e07") == 7);
    CHECK(mesh_topo_pick_gpu(t, 2, -1, "GPU-5c1a0e") == 2); /* ambiguous: not followed */
    CHECK(mesh_topo_pick_gpu(t, 2, -1, "GPU-8a1b") == 2);   /* not on this node */
    CHECK(mesh_topo_pick_gpu(t, 3, -1, "MIG-8a1b") == 3);
    CHECK(mesh_topo_pick_gpu(t, 2, -1, "12") == 2);
    mesh_topo_free(t);
}

static void test_pcie4(void)
{
    mesh_topo_t *t = load("pcie4.xml");
    /* the HDMI audio functions of the boards are NVIDIA devices but no GPUs */
    check_counts(t, 1, 1, 8, 16, 4, 1);
    /* GPUs 0 and 1 reach the NIC through the package, 2 and 3 share its host bridge */
    check_gpu(t, 0, "0000:01:00.0", "mlx5_0", 6, "0-15", 0, 15, 16, 0);
    check_gpu(t, 1, "0000:02:00.0", "mlx5_0", 6, "0-15", 0, 15, 16, 0);
    check_gpu(t, 2, "0000:41:00.0", "mlx5_0", 4, "0-15", 0, 15, 16, 0);
    check_gpu(t, 3, "0000:42:00.0", "mlx5_0", 4, "0-15", 0, 15, 16, 0);
    CHECK(strcmp(mesh_topo_gpu(t, 0)->model, "GA102GL [RTX A6000]") == 0);
    const mesh_topo_nic_t *n = mesh_topo_nic(t, 0);
    CHECK(n->kind == MESH_TOPO_NIC_RDMA && strcmp(n->netdev, "enp67s0f0np0") == 0);
    CHECK(strcmp(n->pci, "0000:43:00.0") == 0);
    CHECK(mesh_topo_pick_gpu(t, 5, -1, NULL) == 1);
    CHECK(mesh_topo_pick_gpu(t, 0, -1, "7") == 0); /* beyond the node's 4: ignored */
    CHECK(mesh_topo_gpu(t, 0)->uuid[0] == '\0');   /* no NVML osdev in this one */
    mesh_topo_free(t);
}

static void test_cpuonly(void)
{
    mesh_topo_t *t = load("cpuonly.xml");
    check_counts(t, 1, 2, 4, 4, 0, 1);
    const mesh_topo_nic_t *n = mesh_topo_nic(t, 0);
    CHECK(n->kind == MESH_TOPO_NIC_ETH && strcmp(n->name, "eno1") == 0);
    CHECK(strcmp(n->netdev, "eno1") == 0 && n->numa == 0);
    CHECK(mesh_topo_gpu(t, 0) == NULL);
    CHECK(mesh_topo_pick_gpu(t, 1, 0, "0") == -1);
    mesh_topo_summary_t s;
    mesh_topo_fill_summary(t, -1, NULL, &s);
    CHECK(s.gpu == -1 && s.cpu_first == 0 && s.cpu_last == 3 && s.cpu_count == 4);
    CHECK(strcmp(s.nic, "eno1") == 0);
    mesh_topo_free(t);
}

static void test_errors(void)
{
    mesh_topo_t *t = NULL;
    CHECK(mesh_topo_load(fixture("no-such-file.xml"), &t) == MESH_ERR_INVALID_ARG && t == NULL);
    CHECK(mesh_topo_load(fixture("gen_fixtures.py"), &t) == MESH_ERR_INVALID_ARG && t == NULL);
}

/* This machine, discovered: a process bound to one CPU reports that CPU. */
static void test_binding(void)
{
    mesh_topo_t *t = NULL;
    CHECK(mesh_topo_load(NULL, &t) == MESH_OK);
    CHECK(mesh_topo_source(t) == NULL && mesh_topo_npus(t) >= 1);
    cpu_set_t old, one;
    char list[MESH_TOPO_CPUSET_MAX];
    CHECK(sched_getaffinity(0, sizeof(old), &old) == 0);
    int last = mesh_topo_node_cpus(t)->last;
    if (CPU_COUNT(&old) >= 2 && last >= 0 && CPU_ISSET(last, &old)) {
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
        CHECK(mesh_topo_bound_cpus(t, list, sizeof(list)) == 1);
        char want[16];
        snprintf(want, sizeof(want), "%d", last);
        CHECK_MSG(strcmp(list, want) == 0, "bound to '%s', expected '%s'", list, want);
        mesh_topo_summary_t s;
        mesh_topo_fill_summary(t, -1, list, &s);
        CHECK(s.gpu == -1 && s.cpu_first == last && s.cpu_last == last && s.cpu_count == 1);
        CHECK(sched_setaffinity(0, sizeof(old), &old) == 0);
    }
    /* a topology read from a file says nothing about this process's binding */
    mesh_topo_t *f = load("pcie4.xml");
    CHECK(mesh_topo_bound_cpus(f, list, sizeof(list)) == 0 && list[0] == '\0');
    mesh_topo_free(f);
    mesh_topo_free(t);
}

/* MESH_TOPO_FILE through the process-wide topology, exported and read back. */
static void test_process_topology(void)
{
    setenv("MESH_TOPO_FILE", fixture("dgx8.xml"), 1);
    setenv("MESH_LOCAL_RANK", "6", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(mesh_context_init() == MESH_OK);
    const mesh_topo_t *t = NULL, *again = NULL;
    CHECK(mesh_topo_get(&t) == MESH_OK && t != NULL);
    CHECK(mesh_topo_get(&again) == MESH_OK && again == t);
    CHECK(mesh_topo_ngpus(t) == 8 && mesh_topo_nnics(t) == 8);
    CHECK(strcmp(mesh_topo_source(t), fixture("dgx8.xml")) == 0);

    /* the launcher's local rank wins over the one passed, and the answer stays fixed */
    mesh_topo_summary_t s;
    CHECK(mesh_topo_summary(1, &s) == MESH_OK);
    CHECK_MSG(s.gpu == 6 && strcmp(s.nic, "mlx5_6") == 0, "gpu %d nic %s", s.gpu, s.nic);
    CHECK(s.cpu_first == 16 && s.cpu_last == 31 && s.cpu_count == 16);
    CHECK(mesh_topo_summary(0, &s) == MESH_OK && s.gpu == 6);

    char dir[4096], path[4200];
    th_tmpdir(dir, sizeof(dir), "mesh-topo");
    snprintf(path, sizeof(path), "%s/topo.xml", dir);
    CHECK(mesh_topo_export(t, path) == MESH_OK);
    mesh_topo_t *back = NULL;
    CHECK(mesh_topo_load(path, &back) == MESH_OK);
    check_counts(back, 2, 2, 32, 32, 8, 8);
    check_gpu(back, 7, "0000:c1:00.0", "mlx5_7", 4, "16-31", 16, 31, 16, 1);
    mesh_topo_free(back);
    unlink(path);
    rmdir(dir);
    CHECK(mesh_topo_export(t, "/nonexistent-dir/x.xml") == MESH_ERR_IO);
}

int main(void)
{
    const char *src = getenv("top_srcdir");
    snprintf(fixture_dir, sizeof(fixture_dir), "%s/tests/fixtures/topo",
             src && *src ? src : MESH_TEST_SRCDIR);
    setenv("MESH_LOG_LEVEL", "error", 1);
    test_dgx8();
    test_pcie4();
    test_cpuonly();
    test_errors();
    test_binding();
    test_process_topology();
    printf("topology fixtures: ok\n");
    return 0;
}
