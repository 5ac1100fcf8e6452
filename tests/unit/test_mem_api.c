/* mesh.h's device memory calls, on the public API alone: with no device table every device call
 * is refused with MESH_ERR_UNSUPPORTED and a message, host memory still works; with the
 * emulated one (MESH_DEVICE_EMU=1) device and pinned memory are allocated and typed, copies
 * between every pair of types run in order on a stream (delayed, so that a synchronize that
 * returned early would show stale data), and bad arguments are refused by name. The cuda table
 * is hidden by the driver (MESH_CUDA_DRIVER), so the run is the same with a GPU. */
#include "tests/harness/harness.h"
#include "mesh.h"

#include <stdint.h>

#define N 4096

static void test_no_table(void)
{
    void *p = (void *)1, *s = (void *)1;
    int dev;
    mesh_memtype_t type;
    CHECK(mesh_device_table() == NULL);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, 64, &p) == MESH_ERR_UNSUPPORTED && p == NULL);
    CHECK(strstr(mesh_comm_last_error(NULL), "no device table is active") != NULL);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_HOST_PINNED, 64, &p) == MESH_ERR_UNSUPPORTED);
    CHECK(mesh_stream_create(&s) == MESH_ERR_UNSUPPORTED && s == NULL);
    CHECK(mesh_device_current(&dev) == MESH_ERR_UNSUPPORTED);
    CHECK(mesh_stream_synchronize(NULL) == MESH_ERR_UNSUPPORTED);
    char a[8] = "abc", b[8];
    CHECK(mesh_memcpy_async(b, a, 4, NULL) == MESH_ERR_UNSUPPORTED);
    /* host memory needs no table */
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_HOST, 100, &p) == MESH_OK && p != NULL);
    CHECK(((uintptr_t)p & 63) == 0);
    CHECK(mesh_mem_type(p, &type) == MESH_OK && type == MESH_MEMTYPE_HOST);
    mesh_mem_free(p);
    mesh_mem_free(NULL);
    printf("no table: ok\n");
}

static void test_args(void)
{
    void *p;
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, 64, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "ptr is NULL") != NULL);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, 0, &p) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "bytes is 0") != NULL);
    CHECK(mesh_mem_alloc((mesh_memtype_t)7, 64, &p) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "unknown memory type 7") != NULL);
    CHECK(mesh_stream_create(NULL) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_device_current(NULL) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_mem_type(&p, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_memcpy_async(NULL, &p, 8, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "dst is NULL") != NULL);
    CHECK(mesh_memcpy_async(&p, &p, 0, NULL) == MESH_OK); /* nothing to copy */
    printf("arguments: ok\n");
}

static void test_emu(void)
{
    int32_t *h, *pin, *d1, *d2, *back;
    mesh_memtype_t type;
    void *s;
    int dev = -1;
    CHECK(strcmp(mesh_device_table(), "emu") == 0);
    CHECK(mesh_device_current(&dev) == MESH_OK && dev == 0);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_HOST, N * 4, (void **)&h) == MESH_OK);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_HOST_PINNED, N * 4, (void **)&pin) == MESH_OK);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, N * 4, (void **)&d1) == MESH_OK);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, N * 4, (void **)&d2) == MESH_OK);
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_HOST, N * 4, (void **)&back) == MESH_OK);
    CHECK(mesh_mem_type(h, &type) == MESH_OK && type == MESH_MEMTYPE_HOST);
    CHECK(mesh_mem_type(pin, &type) == MESH_OK && type == MESH_MEMTYPE_HOST_PINNED);
    CHECK(mesh_mem_type(d1 + 5, &type) == MESH_OK && type == MESH_MEMTYPE_DEVICE);
    CHECK(mesh_stream_create(&s) == MESH_OK && s != NULL);
    for (int i = 0; i < N; i++) {
        h[i] = i * 3 + 1;
        back[i] = -1;
    }
    /* host -> pinned -> device -> device -> host, in stream order */
    CHECK(mesh_memcpy_async(pin, h, N * 4, s) == MESH_OK);
    CHECK(mesh_memcpy_async(d1, pin, N * 4, s) == MESH_OK);
    CHECK(mesh_memcpy_async(d2, d1, N * 4, s) == MESH_OK);
    CHECK(mesh_memcpy_async(back, d2, N * 4, s) == MESH_OK);
    CHECK(mesh_stream_synchronize(s) == MESH_OK);
    for (int i = 0; i < N; i++)
        CHECK_MSG(back[i] == i * 3 + 1, "element %d: %d", i, back[i]);
    mesh_stream_destroy(s);
    mesh_mem_free(d1);
    mesh_mem_free(d2);
    mesh_mem_free(pin);
    mesh_mem_free(h);
    mesh_mem_free(back);
    printf("emu: ok\n");
}

int main(void)
{
    const char *emu = getenv("MESH_DEVICE_EMU");
    if (emu == NULL || strcmp(emu, "1") != 0) {
        test_no_table();
        test_args();
        return 0;
    }
    test_args();
    test_emu();
    return 0;
}
