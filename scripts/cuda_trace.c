// Host time and count of CUDA runtime calls of a process, printed to stderr at exit: an LD_PRELOAD
// interposer for finding where host time goes on a machine without Nsight Systems (the lent GPU
// machine has none). It found the page-locked allocations that cost each CUDA session 5 ms
// (bench/RESULTS.md, session 20). Larmor links the shared cudart, so the wrappers see its calls;
// cuFFT, cuBLAS and cuSOLVER are opened with dlopen and are not traced.
//   gcc -shared -fPIC -O2 -I/usr/local/cuda/include -o /tmp/cuda_trace.so scripts/cuda_trace.c -ldl
//   LD_PRELOAD=/tmp/cuda_trace.so build-gpu/bench/cartesian_chain_bench --benchmark_filter=SessionFirstFrame_GPU
// Not thread-safe on a function's first call (two threads may register its name twice); the counts
// and totals themselves are updated atomically.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 32 };  // more than the wrapped functions below
static const char* names[N];
static unsigned long long total_ns[N], calls[N];
static int used;

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int slot(const char* n) {
    for (int i = 0; i < used; ++i)
        if (names[i] == n) return i;
    names[used] = n;
    return used++;
}

static void report(void) {
    for (int i = 0; i < used; ++i)
        fprintf(stderr, "cudatrace %-28s %10llu calls %12.3f ms %10.3f us/call\n", names[i], calls[i], total_ns[i] / 1e6,
                calls[i] ? total_ns[i] / 1e3 / calls[i] : 0.0);
}

__attribute__((constructor)) static void init(void) { atexit(report); }

// Each wrapper looks the real function up once, then times every call.
#define WRAP(ret, name, params, args)                                                       \
    ret name params {                                                                       \
        static ret(*real) params;                                                           \
        static int slot_ = -1;                                                              \
        if (!real) {                                                                        \
            real = (ret(*) params)dlsym(RTLD_NEXT, #name);                                  \
            slot_ = slot(#name);                                                            \
        }                                                                                   \
        long long t0 = now();                                                               \
        ret r = real args;                                                                  \
        __sync_fetch_and_add(&total_ns[slot_], (unsigned long long)(now() - t0));          \
        __sync_fetch_and_add(&calls[slot_], 1ULL);                                          \
        return r;                                                                           \
    }

WRAP(cudaError_t, cudaHostAlloc, (void** p, size_t b, unsigned f), (p, b, f))
WRAP(cudaError_t, cudaFreeHost, (void* p), (p))
WRAP(cudaError_t, cudaMallocAsync, (void** p, size_t b, cudaStream_t s), (p, b, s))
WRAP(cudaError_t, cudaFreeAsync, (void* p, cudaStream_t s), (p, s))
WRAP(cudaError_t, cudaMalloc, (void** p, size_t b), (p, b))
WRAP(cudaError_t, cudaFree, (void* p), (p))
WRAP(cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t* s, unsigned f), (s, f))
WRAP(cudaError_t, cudaStreamDestroy, (cudaStream_t s), (s))
WRAP(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t* e, unsigned f), (e, f))
WRAP(cudaError_t, cudaEventDestroy, (cudaEvent_t e), (e))
WRAP(cudaError_t, cudaStreamSynchronize, (cudaStream_t s), (s))
WRAP(cudaError_t, cudaEventSynchronize, (cudaEvent_t e), (e))
WRAP(cudaError_t, cudaMemcpyAsync, (void* d, const void* s, size_t b, enum cudaMemcpyKind k, cudaStream_t st), (d, s, b, k, st))
WRAP(cudaError_t, cudaMemcpy2DAsync, (void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k, cudaStream_t st), (d, dp, s, sp, w, h, k, st))
WRAP(cudaError_t, cudaMemsetAsync, (void* d, int v, size_t b, cudaStream_t st), (d, v, b, st))
WRAP(cudaError_t, cudaLaunchKernel, (const void* f, dim3 g, dim3 b, void** a, size_t sh, cudaStream_t st), (f, g, b, a, sh, st))
WRAP(cudaError_t, cudaGetDeviceProperties, (struct cudaDeviceProp* p, int d), (p, d))
WRAP(cudaError_t, cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned f), (s, e, f))
WRAP(cudaError_t, cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s))
WRAP(cudaError_t, cudaDeviceSynchronize, (void), ())
WRAP(cudaError_t, cudaFuncGetAttributes, (struct cudaFuncAttributes* a, const void* f), (a, f))
WRAP(cudaError_t, cudaOccupancyMaxActiveBlocksPerMultiprocessor, (int* n, const void* f, int b, size_t s), (n, f, b, s))
WRAP(cudaError_t, cudaFuncSetAttribute, (const void* f, enum cudaFuncAttribute a, int v), (f, a, v))
WRAP(cudaError_t, cudaMemGetInfo, (size_t* f, size_t* t), (f, t))
