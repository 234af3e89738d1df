# SPDX-License-Identifier: BSD-3-Clause
"""tcomms: collectives and point-to-point over NCCL, Gloo and UCX, from Python.

    import numpy as np, tcomms
    with tcomms.Comm() as comm:              # the world, from TCOMMS_*/torchrun/Open MPI/Slurm variables
        x = np.ones(4, np.float32)
        comm.all_reduce(x)                   # in place
        child = comm.split([0, 1], hints={"min_ctas": 4})

Buffers are anything exposing memory: NumPy arrays and the buffer protocol, __cuda_array_interface__ or DLPack
for device memory. `tcomms.torch` plugs tcomms into torch.distributed. docs/python.md has the rest.
"""
from . import _lib
from .comm import Comm, Hints, Work, group
from .errors import (Error, InvalidArgument, NoMemory, NotSupported, Timeout, BackendUnavailable,
                     NoBackendForDevice, BadEnvironment, SystemFailure, RemoteFailure, Aborted, ProtocolError,
                     AbiMismatch, NotFound, InternalError, NotBound, Mismatch)

DTYPES = _lib.DTYPES
OPS = _lib.OPS
__version__ = _lib.lib.tcomms_version().decode()

__all__ = ["Comm", "Hints", "Work", "group", "DTYPES", "OPS", "Error", "InvalidArgument", "NoMemory", "NotSupported",
           "Timeout", "BackendUnavailable", "NoBackendForDevice", "BadEnvironment", "SystemFailure", "RemoteFailure",
           "Aborted", "ProtocolError", "AbiMismatch", "NotFound", "InternalError", "NotBound", "Mismatch"]
