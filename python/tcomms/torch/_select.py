# SPDX-License-Identifier: BSD-3-Clause
"""What a torch backend string and pg_options mean for tcomms: which devices tcomms serves, which tcomms module
serves each, and the hints a process group's options become."""
import ctypes
import os

from .. import _lib
from ..errors import InvalidArgument, check

NAME = "tcomms"
_DEVICES = (("cpu", _lib.DEVICE_CPU), ("cuda", _lib.DEVICE_CUDA))


def device_map(backend):
    """{device: backend name} of a torch backend string ("tcomms", "cpu:gloo,cuda:tcomms")."""
    text = str(backend).lower()
    if ":" not in text:
        return {"cpu": text, "cuda": text}
    out = {}
    for part in text.split(","):
        dev, _, name = part.strip().partition(":")
        out[dev.strip()] = name.strip()
    return out


def tcomms_devices(backend):
    """The device types a torch backend string gives to tcomms, in a stable order."""
    m = device_map(backend)
    return [d for d in ("cpu", "cuda") if m.get(d) == NAME]


def _module_devices(name):
    """The devices module `name` serves, as tcomms reads them from the module; None where it does not open."""
    types = ctypes.c_uint32()
    if _lib.lib.tcomms_backend_device_types(name.encode(), ctypes.byref(types)) != 0:
        return None
    return [dev for dev, t in _DEVICES if types.value & (1 << t)]


def _default(dev):
    """(module tcomms takes for `dev` by default here, status): the greatest priority that runs here."""
    name = ctypes.c_char_p()
    st = _lib.lib.tcomms_backend_default(dict(_DEVICES)[dev], ctypes.byref(name))
    return (name.value.decode() if st == 0 else None), st


def selection(devices, bound):
    """(tcomms backend selection, the device types it serves) for the devices tcomms is to serve on a communicator
    bound to `bound` ("cpu" or "cuda"), following TCOMMS_BACKEND as tcomms does: a device-qualified entry names
    the module for that device, a bare name the module for every device it serves; otherwise each device takes
    tcomms' own default there (tcomms_backend_default: by the modules' priorities, the same on every rank of a
    uniform job). Where no CPU module runs on a CUDA-bound group, tcomms serves cuda alone."""
    env = os.environ.get("TCOMMS_BACKEND", "").strip()
    chosen = {}
    for part in (p.strip() for p in env.split(",") if p.strip()):
        if ":" in part:
            dev, _, mod = part.partition(":")
            chosen[dev.strip()] = mod.strip()
        else:
            for dev in _module_devices(part) or ["cpu"]:  # a module that does not open: tcomms names why
                chosen[dev] = part
    parts, served = [], []
    for dev in devices:
        if dev == "cuda" and bound != "cuda":
            continue
        mod = chosen.get(dev)
        if mod is None:
            mod, st = _default(dev)
            if mod is None and dev == "cpu" and bound == "cuda":
                continue
            if mod is None:
                check(st, "no tcomms backend module for %s" % dev)
        parts.append("%s:%s" % (dev, mod))
        served.append(dev)
    return ",".join(parts), served


_UNSET = -2147483648  # NCCL_CONFIG_UNDEF_INT: a ncclConfig_t field torch leaves to NCCL


def hints_from_options(options):
    """The tcomms hints of a new_group/split_group pg_options: torch's ProcessGroupNCCL.Options
    (is_high_priority_stream and config.blocking/cga_cluster_size/min_ctas/max_ctas), a tcomms.torch.Options, a
    dict, or None. Anything else is refused: an option is never dropped silently."""
    if options is None:
        return None
    if isinstance(options, dict):
        return dict(options)
    hints = getattr(options, "hints", None)
    if isinstance(hints, dict):
        return dict(hints)
    if hasattr(options, "is_high_priority_stream") or hasattr(options, "config"):
        out = {}
        if getattr(options, "is_high_priority_stream", False):
            out["high_priority_stream"] = "1"
        config = getattr(options, "config", None)
        for field in ("blocking", "cga_cluster_size", "min_ctas", "max_ctas"):
            value = getattr(config, field, _UNSET) if config is not None else _UNSET
            if value != _UNSET:
                out[field] = str(int(value))
        return out
    raise InvalidArgument("pg_options of type %s: tcomms takes torch's ProcessGroupNCCL.Options, "
                          "tcomms.torch.Options or a dict of hints" % type(options).__name__)
