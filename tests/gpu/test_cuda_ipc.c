/* CUDA IPC through mesh_mem_cuda_ops between two processes on device 0: the parent exports a
 * cuMemAlloc buffer (legacy handle) and a cuMemCreate buffer with POSIX descriptor handles (the
 * descriptor crosses a Unix socket with SCM_RIGHTS), at offsets inside their allocations; the
 * child imports both (twice, counted), reads the parent's data and writes its own through the
 * mappings; the parent checks what the child wrote, byte for byte, and that its own process is
 * refused its own handles; an export's allocation id is the same for two pointers of one
 * allocation and another for an allocation made where a freed one was. Exits 77 without a
 * driver or a device. */
#include <config.h>

#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "tests/harness/harness.h"

#include <stdio.h>

#if !HAVE_CUDA
int main(void)
{
    printf("skip: built without CUDA\n");
    return MESH_TEST_SKIP;
}
#else
#include "libmesh/cuda/cu_driver.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BYTES (1u << 20)
#define OFF1  4096 /* offset of the exported pointer in the legacy allocation */
#define OFF2  512  /* and in the cuMemCreate one */

static const mesh_mem_ops_t *ops = &mesh_mem_cuda_ops;

typedef struct {
    mesh_mem_ipc_t legacy, fd;
    int have_fd;
} msg_t;

static void send_msg(int s, const msg_t *m)
{
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } c;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (m->have_fd) {
        mh.msg_control = c.buf;
        mh.msg_controllen = sizeof(c.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &m->fd.fd, sizeof(int));
    }
    CHECK(sendmsg(s, &mh, 0) == (ssize_t)sizeof(*m));
}

static void recv_msg(int s, msg_t *m)
{
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } c;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof(c.buf)};
    CHECK(recvmsg(s, &mh, MSG_WAITALL) == (ssize_t)sizeof(*m));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (m->have_fd) {
        CHECK_MSG(cm != NULL && cm->cmsg_type == SCM_RIGHTS, "no descriptor came");
        memcpy(&m->fd.fd, CMSG_DATA(cm), sizeof(int));
    }
}

static char recv_byte(int s)
{
    char c = 0;
    CHECK(read(s, &c, 1) == 1);
    return c;
}

static void send_byte(int s, char c)
{
    CHECK(write(s, &c, 1) == 1);
}

static unsigned char pattern(size_t i, int k)
{
    return (unsigned char)(i * 13 + (size_t)k * 71 + 1);
}

static void sync_stream(void *stream)
{
    CHECK(mesh_cu.cuStreamSynchronize((CUstream)stream) == CUDA_SUCCESS);
}

static void push_primary(void)
{
    CUcontext ctx;
    CUdevice dev;
    CHECK(mesh_cu.cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuCtxPushCurrent(ctx) == CUDA_SUCCESS);
}

/* Checks bytes [0, n) of the mapping at p hold pattern k from index first, then writes pattern
 * k + 1 there. */
static void read_then_write(void *p, size_t n, size_t first, int k, void *stream)
{
    unsigned char *h = malloc(n);
    CHECK(h != NULL);
    CHECK(ops->copy_async(h, p, n, stream) == MESH_OK);
    sync_stream(stream);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(h[i] == pattern(first + i, k), "imported byte %zu: %#x", i, h[i]);
    for (size_t i = 0; i < n; i++)
        h[i] = pattern(first + i, k + 1);
    CHECK(ops->copy_async(p, h, n, stream) == MESH_OK);
    sync_stream(stream);
    free(h);
}

static int child(int s)
{
    if (ops->init() != MESH_OK) {
        send_byte(s, 's');
        return MESH_TEST_SKIP;
    }
    send_byte(s, 'r');
    if (recv_byte(s) != 'g')
        return MESH_TEST_SKIP;
    push_primary();
    void *stream;
    CHECK(ops->stream_create(&stream) == MESH_OK);
    msg_t m;
    recv_msg(s, &m);
    void *p1, *p1b;
    CHECK(ops->ipc_import(&m.legacy, &p1) == MESH_OK);
    CHECK(ops->ipc_import(&m.legacy, &p1b) == MESH_OK);
    CHECK_MSG(p1 == p1b, "a second import of one handle maps again");
    mesh_mem_info_t info;
    CHECK(ops->query(p1, &info) == MESH_OK && info.kind == MESH_MEM_DEVICE);
    read_then_write(p1, BYTES - OFF1, OFF1, 1, stream);
    ops->ipc_close(p1b);
    ops->ipc_close(p1);
    if (m.have_fd) {
        void *p2;
        CHECK(ops->ipc_import(&m.fd, &p2) == MESH_OK);
        read_then_write(p2, BYTES - OFF2, OFF2, 3, stream);
        ops->ipc_close(p2);
        close(m.fd.fd);
    }
    ops->stream_destroy(stream);
    send_byte(s, 'd');
    return 0;
}

/* A cuMemCreate allocation with POSIX descriptor handles, mapped read-write on device 0; 0
 * where the device has no such allocations. */
static CUdeviceptr vmm_alloc(size_t *size, CUmemGenericAllocationHandle *h)
{
    int vmm = 0, posix = 0;
    CHECK(mesh_cu.cuDeviceGetAttribute(
              &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuDeviceGetAttribute(
              &posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0) ==
          CUDA_SUCCESS);
    if (!vmm || !posix)
        return 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CHECK(mesh_cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS);
    *size = (BYTES + gran - 1) / gran * gran;
    CUdeviceptr va;
    CHECK(mesh_cu.cuMemCreate(h, *size, &prop, 0) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuMemAddressReserve(&va, *size, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuMemMap(va, *size, 0, *h, 0) == CUDA_SUCCESS);
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(mesh_cu.cuMemSetAccess(va, *size, &acc, 1) == CUDA_SUCCESS);
    return va;
}

static void put_pattern(void *dev, size_t n, int k, void *stream)
{
    unsigned char *h = malloc(n);
    CHECK(h != NULL);
    for (size_t i = 0; i < n; i++)
        h[i] = pattern(i, k);
    CHECK(ops->copy_async(dev, h, n, stream) == MESH_OK);
    sync_stream(stream);
    free(h);
}

/* Bytes [0, first) keep pattern k, [first, n) hold k + 1 (the child's). */
static void check_pattern(void *dev, size_t n, size_t first, int k, void *stream)
{
    unsigned char *h = malloc(n);
    CHECK(h != NULL);
    CHECK(ops->copy_async(h, dev, n, stream) == MESH_OK);
    sync_stream(stream);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(h[i] == pattern(i, i < first ? k : k + 1), "exported byte %zu: %#x", i, h[i]);
    free(h);
}

/* An export names its allocation (mesh_mem_ipc_t.id, what importers cache on): the same for
 * two pointers of one allocation, another for an allocation made where a freed one was. */
static void check_identity(void)
{
    CUdeviceptr a, b;
    mesh_mem_ipc_t h1, h2, h3;
    CHECK(mesh_cu.cuMemAlloc(&a, BYTES) == CUDA_SUCCESS);
    CHECK(ops->ipc_export((void *)(uintptr_t)a, &h1) == MESH_OK);
    CHECK(ops->ipc_export((char *)(uintptr_t)a + OFF1, &h2) == MESH_OK);
    CHECK_MSG(h1.id != 0 && h1.id == h2.id, "ids %llu and %llu for one allocation",
              (unsigned long long)h1.id, (unsigned long long)h2.id);
    CHECK(mesh_cu.cuMemFree(a) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuMemAlloc(&b, BYTES) == CUDA_SUCCESS);
    CHECK(ops->ipc_export((void *)(uintptr_t)b, &h3) == MESH_OK);
    CHECK_MSG(h3.id != h1.id, "an allocation %s the freed one's address has its id %llu",
              b == a ? "at" : "away from", (unsigned long long)h1.id);
    printf("ok: allocation ids %llu, then %llu %s the same address\n", (unsigned long long)h1.id,
           (unsigned long long)h3.id, b == a ? "at" : "not at");
    CHECK(mesh_cu.cuMemFree(b) == CUDA_SUCCESS);
}

static int parent(int s)
{
    mesh_status_t st = ops->init();
    char c = recv_byte(s);
    if (st != MESH_OK || c != 'r') {
        if (c == 'r')
            send_byte(s, 'q');
        printf("skip: %s\n", st != MESH_OK ? mesh_error_last() : "the child has no device");
        return MESH_TEST_SKIP;
    }
    send_byte(s, 'g');
    push_primary();
    void *stream;
    CHECK(ops->stream_create(&stream) == MESH_OK);
    CUdeviceptr d1;
    CHECK(mesh_cu.cuMemAlloc(&d1, BYTES) == CUDA_SUCCESS);
    put_pattern((void *)(uintptr_t)d1, BYTES, 1, stream);
    msg_t m;
    memset(&m, 0, sizeof(m));
    CHECK(ops->ipc_export((char *)(uintptr_t)d1 + OFF1, &m.legacy) == MESH_OK);
    CHECK(m.legacy.offset == OFF1 && m.legacy.size >= BYTES && m.legacy.fd == -1);
    size_t vsize = 0;
    CUmemGenericAllocationHandle vh;
    CUdeviceptr d2 = vmm_alloc(&vsize, &vh);
    m.have_fd = d2 != 0;
    if (d2) {
        put_pattern((void *)(uintptr_t)d2, BYTES, 3, stream);
        CHECK(ops->ipc_export((char *)(uintptr_t)d2 + OFF2, &m.fd) == MESH_OK);
        CHECK(m.fd.fd >= 0 && m.fd.offset == OFF2 && m.fd.size == vsize);
        CHECK(m.fd.kind != m.legacy.kind);
        void *p;
        CHECK(ops->ipc_import(&m.fd, &p) == MESH_ERR_UNSUPPORTED); /* its own process */
    } else {
        printf("note: device 0 has no cuMemCreate POSIX handles: descriptor path not tested\n");
    }
    void *own;
    CHECK(ops->ipc_import(&m.legacy, &own) != MESH_OK); /* its own process: refused, not mapped */
    send_msg(s, &m);
    if (m.have_fd)
        close(m.fd.fd);
    CHECK_MSG(recv_byte(s) == 'd', "the child failed");
    check_pattern((void *)(uintptr_t)d1, BYTES, OFF1, 1, stream);
    printf("ok: legacy handle, offset %d\n", OFF1);
    if (d2) {
        check_pattern((void *)(uintptr_t)d2, BYTES, OFF2, 3, stream);
        printf("ok: POSIX descriptor handle, offset %d\n", OFF2);
        CHECK(mesh_cu.cuMemUnmap(d2, vsize) == CUDA_SUCCESS);
        CHECK(mesh_cu.cuMemAddressFree(d2, vsize) == CUDA_SUCCESS);
        CHECK(mesh_cu.cuMemRelease(vh) == CUDA_SUCCESS);
    }
    CHECK(mesh_cu.cuMemFree(d1) == CUDA_SUCCESS);
    check_identity();
    ops->stream_destroy(stream);
    return 0;
}

int main(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    /* before any CUDA call: a process cannot use CUDA after a fork from one that did */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1]));
    }
    close(sv[1]);
    int rc = parent(sv[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status), "the child died (status %#x)", status);
    if (rc == MESH_TEST_SKIP || WEXITSTATUS(status) == MESH_TEST_SKIP)
        return MESH_TEST_SKIP;
    CHECK_MSG(WEXITSTATUS(status) == 0, "the child failed (%d)", WEXITSTATUS(status));
    return rc;
}
#endif
