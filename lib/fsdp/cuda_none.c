/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP runtime without nvcc: no device ops (cuda.c needs the kernels nvcc builds), so a runtime, or a control-plane
 * exchange, on a CUDA communicator says so. */
#include "rt.h"

tcomms_status_t tc_fsdp_cuda_open(int device, void *stream, uint32_t sync_ms, const tc_fsdp_ops_t **ops,
                                  void **dev)
{
    (void)stream;
    (void)sync_ms;
    (void)ops;
    (void)dev;
    return tc_error(TCOMMS_ERR_NOT_SUPPORTED, "fsdp: cuda:%d: libtcomms was built without nvcc, so the FSDP runtime "
                    "has no CUDA path (configure --with-cuda=DIR with nvcc present)", device);
}
