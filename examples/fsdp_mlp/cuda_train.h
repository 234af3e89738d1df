/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA trainers of fsdp_mlp_cuda: the FSDP back end (cuda_train.c), parameters and compute on the GPU of the
 * world communicator's device, and the one-GPU reference (cuda_reference.c); both the model of model.h computed
 * by cuda_model.cu, so their losses agree (bit for bit in deterministic mode). */
#ifndef FSDP_MLP_CUDA_TRAIN_H
#define FSDP_MLP_CUDA_TRAIN_H

#include <stddef.h>

#include "cuda_model.h"
#include "train.h"

/* 0 when a CUDA device is usable; else 1 with `why` saying what is missing. */
int mlpc_available(char *why, size_t len);
/* Options the CUDA model needs beyond mlp_opts_check (deterministic mode: --lr-log2 >= MLPC_LR_LOG2_MIN); 0, or
 * -1 with res->err. */
int mlpc_opts_check(const mlp_opts_t *o, mlp_result_t *res);
/* The compute kind of a run. */
mlpc_kind_t mlpc_kind_of(const mlp_opts_t *o);
/* As mlp_train_fsdp, on the CUDA device `world` is bound to (a "nccl" or "cpu:<x>,cuda:nccl" world on cuda:N). */
int mlpc_train_fsdp(tcomms_comm_t *world, const mlp_opts_t *o, mlp_result_t *res);
/* As mlp_train_reference, on the current CUDA device. */
int mlpc_train_reference(const mlp_opts_t *o, mlp_result_t *res);

#endif
