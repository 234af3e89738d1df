# SPDX-License-Identifier: BSD-3-Clause
"""tcomms as a torch.distributed backend.

    import tcomms.torch                      # registers the backend "tcomms"
    dist.init_process_group("tcomms")        # or "cpu:gloo,cuda:tcomms", device_id=torch.device("cuda", i)
    g = dist.new_group([0, 1], pg_options=tcomms.torch.Options(hints={"max_ctas": 8}))

Which tcomms module serves each device follows tcomms' own selection (TCOMMS_BACKEND; by default ucx, else gloo,
for cpu and nccl for cuda). With TCOMMS_TORCH=1 and the package installed, an unchanged script's "nccl", "gloo"
and "cpu:gloo,cuda:nccl" groups run on tcomms (tcomms.torch._route). docs/python.md has the rest.
"""
import torch.distributed as _dist

from ._backend import install as _install
from ._pg import ProcessGroupTcomms

if not _dist.is_available():
    raise ImportError("tcomms.torch: this torch was built without torch.distributed")


class Options:
    """pg_options for new_group/split_group: tcomms hints for the new group (any key tcomms_hints_set takes)."""

    def __init__(self, hints=None, **kwargs):
        self.hints = dict(hints or {})
        self.hints.update({k: v for k, v in kwargs.items()})


def comm_of(group=None):
    """The tcomms.Comm behind a process group (default: the world), for its hints and modules."""
    pg = group or _dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupTcomms):
        raise TypeError("process group %r does not run on tcomms" % (pg,))
    return pg.comm


_install()
__all__ = ["Options", "ProcessGroupTcomms", "comm_of"]
