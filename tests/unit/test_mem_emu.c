/* The memory seam and the emulated device: mesh_mem_query's answers with and without tables,
 * the allocator's kinds and devices, streams that run in order and late (the delay knob), events,
 * flags written and waited on by streams, the current device per thread, and IPC: an
 * allocation's descriptor passed over a Unix socket to another process, which maps it and
 * writes what the exporter then reads. Run twice by the driver: with MESH_DEVICE_EMU=1 (the
 * table active) and without (its memory recognised but refused). */
#include "tests/harness/harness.h"
#include "libmesh/mem_emu.h"
#include "libmesh/config.h"
#include "libmesh/progress.h"
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_inactive(void)
{
    mesh_mem_info_t info;
    char host[8];
    void *d;
    CHECK(mesh_mem_table("emu") == NULL);
    /* no table is active nor has memory: every pointer is host memory after one load */
    CHECK(mesh_mem_query(host, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    CHECK(mesh_mem_host_only());
    /* emulated memory allocated anyway is still recognised, so collectives can refuse it */
    CHECK(mesh_mem_emu_alloc(&d, 100, 0) == MESH_OK);
    CHECK(!mesh_mem_host_only());
    CHECK(mesh_mem_query(d, &info) == MESH_OK && info.kind == MESH_MEM_DEVICE);
    CHECK(!mesh_mem_table_active(info.ops));
    CHECK(mesh_mem_query(host, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    mesh_mem_emu_free(d);
    printf("inactive: ok\n");
}

static const mesh_mem_ops_t *t;

static void test_query(void)
{
    mesh_mem_info_t info;
    void *d0, *d3, *pinned;
    char host[8];
    CHECK(!mesh_mem_host_only());
    CHECK(mesh_mem_emu_alloc(&d0, 1000, 0) == MESH_OK);
    CHECK(mesh_mem_emu_alloc(&d3, 0, 3) == MESH_OK);
    CHECK(t->host_alloc(&pinned, 64) == MESH_OK);
    CHECK(mesh_mem_query(d0, &info) == MESH_OK);
    CHECK(info.kind == MESH_MEM_DEVICE && info.device == 0 && info.ops == t);
    CHECK(info.base == d0 && info.size == 1000);
    /* an interior pointer belongs to its allocation; one past the end does not */
    CHECK(mesh_mem_query((char *)d0 + 999, &info) == MESH_OK && info.kind == MESH_MEM_DEVICE);
    CHECK(info.base == d0);
    CHECK(mesh_mem_query((char *)d0 + 1000, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    CHECK(mesh_mem_query(d3, &info) == MESH_OK && info.kind == MESH_MEM_DEVICE);
    CHECK(info.device == 3);
    CHECK(mesh_mem_query(pinned, &info) == MESH_OK && info.kind == MESH_MEM_HOST_PINNED);
    CHECK(mesh_mem_query(host, &info) == MESH_OK && info.kind == MESH_MEM_HOST && !info.ops);
    CHECK(mesh_mem_query(NULL, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    mesh_mem_emu_free(d0);
    CHECK(mesh_mem_query(d0, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    mesh_mem_emu_free(d3);
    t->host_free(pinned);
    printf("query: ok\n");
}

static void *other_device(void *arg)
{
    int *dev = arg;
    CHECK(t->current_device(&dev[0]) == MESH_OK);
    mesh_mem_emu_set_device(5);
    CHECK(t->current_device(&dev[1]) == MESH_OK);
    return NULL;
}

static void test_device(void)
{
    int dev = -1, other[2] = {-1, -1};
    CHECK(t->current_device(&dev) == MESH_OK && dev == mesh_config_int("DEVICE_EMU_DEVICE"));
    mesh_mem_emu_set_device(2);
    CHECK(t->current_device(&dev) == MESH_OK && dev == 2);
    /* per thread: another thread starts from the default */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_device, other) == 0);
    pthread_join(th, NULL);
    CHECK(other[0] == (int)mesh_config_int("DEVICE_EMU_DEVICE") && other[1] == 5);
    CHECK(t->current_device(&dev) == MESH_OK && dev == 2);
    mesh_mem_emu_set_device(-1);
    printf("device: ok\n");
}

/* Work on a stream runs in order and after the call returned; an event says when it ran. */
static void test_stream(void)
{
    void *s, *s2, *ev;
    uint32_t *flags;
    int32_t *a, *b;
    int32_t two = 2;
    CHECK(t->stream_create(&s) == MESH_OK && t->stream_create(&s2) == MESH_OK);
    CHECK(t->event_create(&ev) == MESH_OK);
    CHECK(t->host_alloc((void **)&flags, 2 * sizeof(uint32_t)) == MESH_OK);
    flags[0] = flags[1] = 0;
    CHECK(mesh_mem_emu_alloc((void **)&a, 64 * sizeof(int32_t), 0) == MESH_OK);
    CHECK(mesh_mem_emu_alloc((void **)&b, 64 * sizeof(int32_t), 0) == MESH_OK);
    for (int i = 0; i < 64; i++)
        a[i] = i;
    mesh_mem_emu_hold(1);
    CHECK(t->copy_async(b, a, 64 * sizeof(int32_t), s) == MESH_OK);          /* b = i */
    CHECK(t->reduce_async(b, b, a, 64, MESH_INT32, MESH_SUM, s) == MESH_OK); /* 2i */
    CHECK(t->scale_async(b, b, 64, MESH_INT32, &two, s) == MESH_OK);         /* 4i */
    CHECK(t->divide_async(b, 64, MESH_INT32, 4, s) == MESH_OK);              /* i */
    CHECK(t->reduce_async(b, b, a, 64, MESH_INT32, MESH_MAX, s) == MESH_OK);
    CHECK(t->event_record(ev, s) == MESH_OK);
    usleep(20000);
    CHECK(t->event_query(ev) == MESH_INPROGRESS); /* held: nothing ran */
    CHECK(b[10] == 0);
    mesh_mem_emu_hold(0);
    double t0 = mesh_time();
    while (t->event_query(ev) == MESH_INPROGRESS)
        CHECK(mesh_time() - t0 < 10);
    for (int i = 0; i < 64; i++)
        CHECK_MSG(b[i] == i, "b[%d] = %d", i, b[i]);

    /* s waits for a flag the host writes; s2 waits for s's event: nothing passes before */
    CHECK(t->stream_wait(s, &flags[0], 1) == MESH_OK);
    CHECK(t->copy_async(b, a, 4, s) == MESH_OK);
    CHECK(t->stream_write(s, &flags[1], 7) == MESH_OK);
    CHECK(t->event_record(ev, s) == MESH_OK);
    CHECK(t->stream_wait_event(s2, ev) == MESH_OK);
    a[0] = 42;
    usleep(20000);
    CHECK(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 0 && b[0] == 0);
    CHECK(t->event_query(ev) == MESH_INPROGRESS);
    __atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
    CHECK(mesh_mem_emu_stream_sync(s2) == MESH_OK);
    CHECK(t->event_query(ev) == MESH_OK);
    CHECK(flags[1] == 7 && b[0] == 42);
    /* wrapping counts: 0xffffffff is before 1 */
    flags[0] = 0xffffffffu;
    CHECK(t->stream_wait(s, &flags[0], 0xffffffffu) == MESH_OK);
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK);
    mesh_mem_emu_free(a);
    mesh_mem_emu_free(b);
    t->host_free(flags);
    t->event_destroy(ev);
    t->stream_destroy(s);
    t->stream_destroy(s2);
    printf("stream: ok\n");
}

static void send_fd(int sock, const mesh_mem_ipc_t *h)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = (void *)h, .iov_len = sizeof(*h)};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &h->fd, sizeof(int));
    CHECK(sendmsg(sock, &m, 0) == (ssize_t)sizeof(*h));
}

static void recv_fd(int sock, mesh_mem_ipc_t *h)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = h, .iov_len = sizeof(*h)};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    CHECK(recvmsg(sock, &m, 0) == (ssize_t)sizeof(*h));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    CHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
    memcpy(&h->fd, CMSG_DATA(c), sizeof(int));
}

/* The exporter's allocation, mapped by another process, is the same memory. */
static void test_ipc(void)
{
    int sv[2];
    int32_t *d;
    mesh_mem_ipc_t h;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(mesh_mem_emu_alloc((void **)&d, 10000, 1) == MESH_OK);
    d[100] = 5;
    CHECK(t->ipc_export(d + 100, &h) == MESH_OK && h.offset == 400);
    close(h.fd); /* the exporter's descriptor is the caller's */
    uint64_t id = h.id;
    char host[8];
    CHECK(t->ipc_export(host, &h) == MESH_ERR_INVALID_ARG);
    CHECK(t->ipc_export(d + 100, &h) == MESH_OK && h.id == id && id != 0);
    /* another allocation has another identity, at whatever address it lands */
    int32_t *other;
    mesh_mem_ipc_t ho;
    CHECK(mesh_mem_emu_alloc((void **)&other, 64, 1) == MESH_OK);
    CHECK(t->ipc_export(other, &ho) == MESH_OK && ho.id != id);
    close(ho.fd);
    mesh_mem_emu_free(other);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        mesh_mem_ipc_t r;
        int32_t *p;
        mesh_mem_info_t info;
        close(sv[0]);
        recv_fd(sv[1], &r);
        CHECK(t->ipc_import(&r, (void **)&p) == MESH_OK);
        CHECK(mesh_mem_query(p, &info) == MESH_OK && info.kind == MESH_MEM_DEVICE);
        CHECK(info.device == 1);
        CHECK(p[0] == 5);
        p[1] = 77; /* d[101] in the exporter */
        t->ipc_close(p);
        CHECK(mesh_mem_query(p, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
        _exit(0);
    }
    close(sv[1]);
    send_fd(sv[0], &h);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(d[101] == 77);
    /* in the same process too (a second mapping of the same memory) */
    int32_t *q;
    CHECK(t->ipc_import(&h, (void **)&q) == MESH_OK && q != d + 100);
    q[2] = 9;
    CHECK(d[102] == 9);
    t->ipc_close(q);
    mesh_mem_emu_free(d);
    close(h.fd);
    close(sv[0]);
    printf("ipc: ok\n");
}

int main(void)
{
    CHECK(mesh_mem_config_register() == MESH_OK);
    if (!mesh_config_bool("DEVICE_EMU")) {
        test_inactive();
        return 0;
    }
    t = mesh_mem_table("emu");
    CHECK(t != NULL && mesh_mem_table(NULL) != NULL);
    test_query();
    test_device();
    test_stream();
    test_ipc();
    return 0;
}
