/* SPDX-License-Identifier: BSD-3-Clause */
/* The NCCL backend's one exported symbol, tcomms_backend_module, and query(): can NCCL run here? It declines with
 * the CUDA runtime's reason (no driver, no device) so tcomms-info can say why. Communicators are in comm.c,
 * operations in ops.c and work.c, the watchdog in watchdog.c (docs/nccl.md). */
#include <stdio.h>
#include <stdlib.h>

#include "tcn.h"

const tcomms_core_t *tcn_core;

static tcomms_status_t query(const tcomms_core_t *core, char *reason, size_t len)
{
    tcn_core = core;
    int ndev = 0, nccl_version = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (reason && len) {
            if (e != cudaSuccess)
                snprintf(reason, len, "no usable GPU: cudaGetDeviceCount failed: %s (%s)%s", cudaGetErrorString(e),
                         cudaGetErrorName(e),
                         e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                             ? "; is an NVIDIA driver installed and a GPU present?" : "");
            else
                snprintf(reason, len, "no usable GPU: the CUDA runtime sees 0 devices%s%s", vis ? " with "
                         "CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "");
        }
        return TCOMMS_ERR_BACKEND_UNAVAILABLE;
    }
    ncclGetVersion(&nccl_version);
    if (nccl_version < NCCL_VERSION(2, 14, 0)) {
        if (reason && len)
            snprintf(reason, len, "the NCCL library loaded is version code %d; this module needs 2.14 or newer "
                     "(built with %d.%d.%d)", nccl_version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
        return TCOMMS_ERR_BACKEND_UNAVAILABLE;
    }
    core->log(TCOMMS_LOG_DEBUG, "nccl", "%d CUDA device(s); NCCL library version code %d, headers %d.%d.%d", ndev,
              nccl_version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    if (reason && len)
        reason[0] = '\0';
    return TCOMMS_SUCCESS;
}

static const char *const honoured_hints[] = {
    "high_priority_stream", "cga_cluster_size", "min_ctas", "max_ctas", "blocking",
#if TCN_HAS_SPLIT
    "split_share",
#endif
    "nccl.net_name", "nccl.small_bytes",
#if TCN_HAS_CONFIG_27
    "nccl.traffic_class", "nccl.comm_name", "nccl.collnet_enable", "nccl.cta_policy", "nccl.shrink_share",
    "nccl.nvls_ctas",
#endif
#if TCN_HAS_CONFIG_28
    "nccl.n_channels_per_net_peer", "nccl.nvlink_centric_sched",
#endif
    NULL};

__attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_module = {
    .abi = TCOMMS_ABI_INIT(tcomms_backend_t),
    .name = "nccl",
    .description = "NVIDIA NCCL on CUDA device buffers: stream-ordered collectives and point-to-point, groups, "
                   "registration, a watchdog that aborts on timeout",
    .device_types = 1u << TCOMMS_DEVICE_CUDA,
    .hints = honoured_hints,
    .query = query,
    .comm_create = tcn_comm_create,
    .comm_destroy = tcn_comm_destroy,
    .post = tcn_post,
    .work_test = tcn_work_test,
    .work_wait = tcn_work_wait,
    .work_free = tcn_work_free,
    .work_synchronize = tcn_work_synchronize,
    .comm_split_nonmember = tcn_comm_split_nonmember,
    .group_start = tcn_group_start,
    .group_end = tcn_group_end,
    .mem_alloc = tcn_mem_alloc,
    .mem_free = tcn_mem_free,
    .mem_register = tcn_mem_register,
    .mem_deregister = tcn_mem_deregister,
    .priority = 20, /* the default for CUDA: the only CUDA module of this tree (docs/backends.md, Selection) */
    .comm_abort = tcn_comm_abort,
    .algorithm = tcn_algorithm,
    .comm_setting = tcn_comm_setting,
    .comm_shrink = tcn_comm_shrink,
};
