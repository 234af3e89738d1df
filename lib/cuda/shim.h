/* SPDX-License-Identifier: BSD-3-Clause */
/* The one way tcomms reaches CUDA without linking it: the entry points each user calls, looked up with dlopen/dlsym on
 * first use. The FSDP runtime (lib/fsdp/cuda.c) takes the driver's, tcomms-perf (tools/perf/cuda.c) the runtime's. */
#ifndef TC_CUDA_SHIM_H
#define TC_CUDA_SHIM_H

#include <stddef.h>

/* The runtime's constants tcomms-perf passes, by the enum that holds them, with their values in driver_types.h. */
#define TC_CUDART_ERRORS(X) X(cudaSuccess, 0)
#define TC_CUDART_MEMCPY_KINDS(X) X(cudaMemcpyHostToDevice, 1) X(cudaMemcpyDeviceToHost, 2)
#define TC_CUDART_CAPTURE_MODES(X) X(cudaStreamCaptureModeThreadLocal, 1)
#define TC_CUDART_DEVICE_ATTRS(X) X(cudaDevAttrPciBusId, 33) X(cudaDevAttrPciDeviceId, 34) X(cudaDevAttrPciDomainId, 50)
#define TC_CUDART_STREAM_FLAGS(X) X(cudaStreamNonBlocking, 0x01)

/* TC_CUDA_HEADERS (lib/cuda/local.mk) says configure found the toolkit: its headers then declare everything, and
 * shim.c checks the lists here against them. Without it (CI's machine has no CUDA) the runtime half is declared from
 * the lists, enums and handles as the runtime's ABI passes them; the driver half's one user needs nvcc anyway. */
#ifdef TC_CUDA_HEADERS
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
#define TC_CUDART_ENUMERATOR(name, value) name = value,
typedef enum cudaError { TC_CUDART_ERRORS(TC_CUDART_ENUMERATOR) } cudaError_t;
enum cudaMemcpyKind { TC_CUDART_MEMCPY_KINDS(TC_CUDART_ENUMERATOR) };
enum cudaStreamCaptureMode { TC_CUDART_CAPTURE_MODES(TC_CUDART_ENUMERATOR) };
enum cudaDeviceAttr { TC_CUDART_DEVICE_ATTRS(TC_CUDART_ENUMERATOR) };
enum { TC_CUDART_STREAM_FLAGS(TC_CUDART_ENUMERATOR) };
#undef TC_CUDART_ENUMERATOR
typedef struct CUstream_st *cudaStream_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
#endif

/* The runtime entry points tcomms-perf calls: name, return type, parameters as cuda_runtime_api.h declares them. */
#define TC_CUDART_CALLS(X)                                                                                            \
    X(cudaGetErrorString, const char *, (cudaError_t))                                                                \
    X(cudaGetErrorName, const char *, (cudaError_t))                                                                  \
    X(cudaGetDeviceCount, cudaError_t, (int *))                                                                       \
    X(cudaSetDevice, cudaError_t, (int))                                                                              \
    X(cudaDeviceGetAttribute, cudaError_t, (int *, enum cudaDeviceAttr, int))                                         \
    X(cudaMalloc, cudaError_t, (void **, size_t))                                                                     \
    X(cudaFree, cudaError_t, (void *))                                                                                \
    X(cudaMemsetAsync, cudaError_t, (void *, int, size_t, cudaStream_t))                                              \
    X(cudaMemcpyAsync, cudaError_t, (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t))                \
    X(cudaStreamCreateWithFlags, cudaError_t, (cudaStream_t *, unsigned int))                                         \
    X(cudaStreamDestroy, cudaError_t, (cudaStream_t))                                                                 \
    X(cudaStreamSynchronize, cudaError_t, (cudaStream_t))                                                             \
    X(cudaStreamBeginCapture, cudaError_t, (cudaStream_t, enum cudaStreamCaptureMode))                                \
    X(cudaStreamEndCapture, cudaError_t, (cudaStream_t, cudaGraph_t *))                                               \
    X(cudaGraphInstantiateWithFlags, cudaError_t, (cudaGraphExec_t *, cudaGraph_t, unsigned long long))               \
    X(cudaGraphLaunch, cudaError_t, (cudaGraphExec_t, cudaStream_t))                                                  \
    X(cudaGraphDestroy, cudaError_t, (cudaGraph_t))                                                                   \
    X(cudaGraphExecDestroy, cudaError_t, (cudaGraphExec_t))

#ifndef TC_CUDA_HEADERS
#define TC_CUDART_DECLARE(name, ret, params) ret name params;
TC_CUDART_CALLS(TC_CUDART_DECLARE) /* for __typeof__ only: nothing links them */
#undef TC_CUDART_DECLARE
#endif

/* A table of the runtime's entry points, each named as the function it holds: rt->cudaMalloc(&p, n). */
#define TC_CUDART_FIELD(name, ret, params) __typeof__(name) *name;
typedef struct tc_cudart { TC_CUDART_CALLS(TC_CUDART_FIELD) } tc_cudart_t;
#undef TC_CUDART_FIELD

/* The runtime already in the process (a backend linked it) if any, else the first of libcudart.so.13, .so.12 and .so
 * that loads; `only`, when not NULL, is the one library tried (a test's stand-in). The first success is kept and
 * later calls return it; a failure is not kept. NULL with a sentence in `why`: what was tried and the loader's words,
 * or the entry point missing. */
const tc_cudart_t *tc_cudart_load(const char *only, char *why, size_t len);
/* "CALL failed: the runtime's text (cudaErrorName)" into buf, as every CUDA failure in tcomms reads; returns buf.
 * Before a table was loaded the runtime cannot name the error: "CALL failed: CUDA error N". */
const char *tc_cudart_describe(char *buf, size_t len, const char *call, cudaError_t err);

#ifdef TC_CUDA_HEADERS
/* The driver entry points the FSDP runtime calls, by their plain names: cuda.h maps some onto versioned symbols
 * (cuMemAlloc is cuMemAlloc_v2), and the table and its dlsym take the same mapping. */
#define TC_CUDA_DRIVER_CALLS(X)                                                                                       \
    X(cuInit) X(cuGetErrorString) X(cuGetErrorName) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)                        \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetStreamPriorityRange)                 \
    X(cuMemAlloc) X(cuMemFree) X(cuMemcpyAsync) X(cuMemsetD8Async) X(cuPointerGetAttribute)                           \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)                                    \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamQuery) X(cuStreamWaitEvent)                            \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)

#define TC_CUDA_DRIVER_FIELD(name) __typeof__(name) *name;
typedef struct tc_cuda_driver { TC_CUDA_DRIVER_CALLS(TC_CUDA_DRIVER_FIELD) } tc_cuda_driver_t;
#undef TC_CUDA_DRIVER_FIELD

/* libcuda.so.1, with cuInit(0) done; a success is kept, a failure is not, as with tc_cudart_load. */
const tc_cuda_driver_t *tc_cuda_driver_load(char *why, size_t len);
/* "CALL failed: the driver's text (CUDA_ERROR_NAME)", as tc_cudart_describe. */
const char *tc_cuda_driver_describe(char *buf, size_t len, const char *call, CUresult err);
#endif

#endif
