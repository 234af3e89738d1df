# SPDX-License-Identifier: BSD-3-Clause
"""Routing (TCOMMS_TORCH=1, through python/tcomms_torch_hook.py): from enable() on, every group torch creates for
"gloo", "nccl", "cpu:gloo,cuda:nccl" or the default is a tcomms group (new_group a split of the world), while
torch's records keep the name the script asked for (_backend.routed, _backend._record_backend)."""


def enable():
    """Register the backend and turn routing on now."""
    from . import _backend
    _backend.install()
    _backend._routing["on"] = True
