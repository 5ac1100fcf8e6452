/* The device of tests/nccl/nccl_device.c, included by it alone: buffers and streams of the
 * emulated device (NCCL_DEVICE_EMU, through mesh's public device API) or of GPU 0 through the
 * CUDA driver opened with dlopen, and the program's host buffers. Uses its CHECK and g_rank. */
#ifndef MESH_TEST_NCCL_DEVICE_MEM_H
#define MESH_TEST_NCCL_DEVICE_MEM_H

/* ---------------------------------------------------------------- the device */

#ifdef NCCL_DEVICE_EMU
/* mesh's public device API on the emulated device: the shim's own table in this program */
static int dev_setup(void)
{
    const char *t = mesh_device_table();
    return t != NULL && strcmp(t, "emu") == 0 ? 0 : 77;
}

static int dev_expected(void)
{
    const char *d = getenv("MESH_DEVICE_EMU_DEVICE");
    return d != NULL ? atoi(d) : 0;
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK(mesh_mem_alloc(MESH_MEMTYPE_DEVICE, bytes, &p) == MESH_OK, "device allocation: %s",
          mesh_comm_last_error(NULL));
    return p;
}

static void dev_free(void *p)
{
    mesh_mem_free(p);
}

static void dev_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    CHECK(mesh_memcpy_async(dst, src, bytes, stream) == MESH_OK, "copy: %s",
          mesh_comm_last_error(NULL));
}
#define dev_copy_in  dev_copy /* host to device */
#define dev_copy_out dev_copy /* device to host */

static void *dev_stream(void)
{
    void *s = NULL;
    CHECK(mesh_stream_create(&s) == MESH_OK, "stream: %s", mesh_comm_last_error(NULL));
    return s;
}

static void dev_sync(void *s)
{
    CHECK(mesh_stream_synchronize(s) == MESH_OK, "synchronize: %s", mesh_comm_last_error(NULL));
}

static void dev_stream_free(void *s)
{
    mesh_stream_destroy(s);
}
#else
/* The CUDA driver, as a program of the CUDA runtime would reach the device (cudaMalloc is
 * cuMemAlloc in the primary context, which cudaSetDevice makes current). */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
static struct {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t, void *);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t, void *);
    CUresult (*stream_create)(void **, unsigned);
    CUresult (*stream_sync)(void *);
    CUresult (*stream_destroy)(void *);
    /* optional: holding a stream on a flag in mapped host memory */
    CUresult (*host_alloc)(void **, size_t, unsigned);
    CUresult (*host_free)(void *);
    CUresult (*host_devptr)(CUdeviceptr *, void *, unsigned);
    CUresult (*wait_value)(void *, CUdeviceptr, uint32_t, unsigned);
} cu;

#define CU(call) CHECK((call) == 0, "CUDA driver call failed")

/* 0 once GPU 0's primary context is current on this thread; 77 without a driver or a GPU. */
static int dev_setup(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL)
        return 77;
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&cu.init, "cuInit"},
        {(void **)&cu.count, "cuDeviceGetCount"},
        {(void **)&cu.get, "cuDeviceGet"},
        {(void **)&cu.retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&cu.set_current, "cuCtxSetCurrent"},
        {(void **)&cu.alloc, "cuMemAlloc_v2"},
        {(void **)&cu.free, "cuMemFree_v2"},
        {(void **)&cu.htod, "cuMemcpyHtoDAsync_v2"},
        {(void **)&cu.dtoh, "cuMemcpyDtoHAsync_v2"},
        {(void **)&cu.stream_create, "cuStreamCreate"},
        {(void **)&cu.stream_sync, "cuStreamSynchronize"},
        {(void **)&cu.stream_destroy, "cuStreamDestroy_v2"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
        if ((*syms[i].fn = dlsym(h, syms[i].name)) == NULL)
            return 77;
    *(void **)&cu.host_alloc = dlsym(h, "cuMemHostAlloc");
    *(void **)&cu.host_free = dlsym(h, "cuMemFreeHost");
    *(void **)&cu.host_devptr = dlsym(h, "cuMemHostGetDevicePointer_v2");
    *(void **)&cu.wait_value = dlsym(h, "cuStreamWaitValue32_v2");
    if (cu.wait_value == NULL)
        *(void **)&cu.wait_value = dlsym(h, "cuStreamWaitValue32");
    int n = 0;
    CUdevice dev;
    CUcontext ctx;
    if (cu.init(0) != 0 || cu.count(&n) != 0 || n < 1)
        return 77;
    CU(cu.get(&dev, 0));
    CU(cu.retain(&ctx, dev));
    CU(cu.set_current(ctx));
    return 0;
}

static int dev_expected(void)
{
    return 0;
}

static void *dev_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(cu.alloc(&p, bytes));
    return (void *)(uintptr_t)p;
}

static void dev_free(void *p)
{
    cu.free((CUdeviceptr)(uintptr_t)p);
}

/* host to device, and device to host */
static void dev_copy_in(void *dst, const void *src, size_t bytes, void *stream)
{
    CU(cu.htod((CUdeviceptr)(uintptr_t)dst, src, bytes, stream));
}

static void dev_copy_out(void *dst, const void *src, size_t bytes, void *stream)
{
    CU(cu.dtoh(dst, (CUdeviceptr)(uintptr_t)src, bytes, stream));
}

static void *dev_stream(void)
{
    void *s = NULL;
    CU(cu.stream_create(&s, 0));
    return s;
}

static void dev_sync(void *s)
{
    CU(cu.stream_sync(s));
}

static void dev_stream_free(void *s)
{
    cu.stream_destroy(s);
}
#endif

/* Host buffers of this program come from host_alloc, which records them. */
static void *host_bufs[64];
static size_t host_sizes[64];
static int nhost;

static void *host_alloc(size_t bytes)
{
    CHECK(nhost < 64, "too many host buffers");
    void *p = malloc(bytes);
    CHECK(p != NULL, "out of memory");
    host_bufs[nhost] = p;
    host_sizes[nhost++] = bytes;
    return p;
}

static void host_free_all(void)
{
    for (int i = 0; i < nhost; i++)
        free(host_bufs[i]);
    nhost = 0;
}

#endif
