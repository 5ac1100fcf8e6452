/* A stand-in for libcuda.so.1 with no device, for tests of how libmesh loads a driver
 * (tests/gpu/cuda_load.sh): cuGetProcAddress_v2 logs each name it is asked for, with the
 * version and flags, to $FAKE_CUDA_LOG, and hands out entry points that fail, except
 * cuDriverGetVersion ($FAKE_CUDA_VERSION, default 13000), cuInit, cuGetErrorName,
 * cuGetErrorString and cuDeviceGetCount (0 devices). A name listed in $FAKE_CUDA_MISSING is not
 * found. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

static CUresult fake_fail(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult fake_version(int *v)
{
    const char *e = getenv("FAKE_CUDA_VERSION");
    *v = e ? atoi(e) : 13000;
    return CUDA_SUCCESS;
}

static CUresult fake_init(unsigned flags)
{
    (void)flags;
    return CUDA_SUCCESS;
}

static CUresult fake_count(int *n)
{
    *n = 0;
    return CUDA_SUCCESS;
}

static CUresult fake_error_text(CUresult r, const char **s)
{
    (void)r;
    *s = "fake";
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *found)
{
    const char *log = getenv("FAKE_CUDA_LOG"), *missing = getenv("FAKE_CUDA_MISSING");
    if (log != NULL) {
        FILE *f = fopen(log, "a");
        if (f != NULL) {
            fprintf(f, "%s %d %llu\n", symbol, version, (unsigned long long)flags);
            fclose(f);
        }
    }
    if (missing != NULL && strcmp(missing, symbol) == 0) {
        *pfn = NULL;
        *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = (void *)fake_fail;
    if (strcmp(symbol, "cuDriverGetVersion") == 0)
        *pfn = (void *)fake_version;
    else if (strcmp(symbol, "cuInit") == 0)
        *pfn = (void *)fake_init;
    else if (strcmp(symbol, "cuDeviceGetCount") == 0)
        *pfn = (void *)fake_count;
    else if (strcmp(symbol, "cuGetErrorName") == 0 || strcmp(symbol, "cuGetErrorString") == 0)
        *pfn = (void *)fake_error_text;
    *found = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
