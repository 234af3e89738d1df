/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_mlp_cuda: fsdp_mlp with parameters and compute on GPUs (cuBLAS GEMMs over each microbatch; one GPU per
 * rank, the world on cuda:<local rank>, NCCL unless TCOMMS_BACKEND says otherwise), or with --reference the same
 * CUDA model unsharded on one GPU. Exits 77 when no GPU is usable. tests/gpu/fsdp.sh compares the two:
 *   tcomms-run -n 2 examples/fsdp_mlp/fsdp_mlp_cuda --strategy 3     and     fsdp_mlp_cuda --reference */
#include "cuda_train.h"

int main(int argc, char **argv)
{
    const mlp_driver_t cuda = {.prog = "fsdp_mlp_cuda",
                               .device = {TCOMMS_DEVICE_CUDA, -1},
                               .available = mlpc_available,
                               .train_fsdp = mlpc_train_fsdp,
                               .train_reference = mlpc_train_reference};
    return mlp_main(argc, argv, &cuda);
}
