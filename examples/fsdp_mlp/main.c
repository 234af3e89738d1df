/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_mlp: train a small MLP with the FSDP runtime on the ranks tcomms-run starts, or unsharded in one process
 * with --reference, printing "step N loss X" per step; both print the same losses. Run it as
 *   tcomms-run -n 4 examples/fsdp_mlp/fsdp_mlp --strategy 3 --ep 2     and     fsdp_mlp --reference --ep 2 */
#include "train.h"

int main(int argc, char **argv)
{
    const mlp_driver_t host = {.prog = "fsdp_mlp",
                               .device = {TCOMMS_DEVICE_CPU, 0},
                               .train_fsdp = mlp_train_fsdp,
                               .train_reference = mlp_train_reference};
    return mlp_main(argc, argv, &host);
}
