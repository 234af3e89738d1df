# SPDX-License-Identifier: BSD-3-Clause
# TCOMMS_TORCH=1: an unchanged torch script (routed_script.py, which never imports tcomms and asks for "gloo") runs
# its process groups on tcomms. Every rank starts the script in a child process whose Python reads a copy of the
# tcomms-torch.pth that `make install` puts in site-packages from a temporary site directory, so the .pth mechanism
# itself is exercised; the children rendezvous through torchrun's variables, on a port of this job.
# ranks: 1 2 3 4
# backends: ucx gloo
# needs: numpy torch
# timeout: 240
import os
import shutil
import subprocess
import sys
import tempfile

import harness
from harness import case

RANK, SIZE = harness.RANK, harness.SIZE
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "routed_script.py")
PTH_LINE = 'import os; os.environ.get("TCOMMS_TORCH") == "1" and __import__("tcomms_torch_hook")'
CHILD_TIMEOUT = 100


def pth_file():
    """python/tcomms-torch.pth, the file `make install` puts in pythondir."""
    path = os.path.join(SRC, "python", "tcomms-torch.pth")
    assert os.path.exists(path), "no %s" % path
    return path


def ports():
    """Two ports for the children's TCPStore, one per run: tcomms-run's MASTER_PORT (its second free port) and
    TCOMMS_MASTER_PORT (free too: this parent opens no store)."""
    base = int(os.environ["TCOMMS_MASTER_PORT"])
    second = int(os.environ.get("MASTER_PORT") or base + 1)
    return second, base


def run_script(routed, port):
    """Run routed_script.py as this rank's child; the parsed fields of its ROUTED line."""
    site_dir = tempfile.mkdtemp(prefix="tcomms-site.")
    try:
        shutil.copy(pth_file(), os.path.join(site_dir, "tcomms-torch.pth"))
        env = dict(os.environ, RANK=str(RANK), WORLD_SIZE=str(SIZE), LOCAL_RANK=str(RANK),
                   LOCAL_WORLD_SIZE=str(SIZE), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.pop("TCOMMS_TORCH", None)
        if routed:
            env["TCOMMS_TORCH"] = "1"
        code = ("import site, runpy, sys; site.addsitedir(%r); sys.argv = [%r]; runpy.run_path(%r, "
                "run_name='__main__')" % (site_dir, SCRIPT, SCRIPT))
        p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=CHILD_TIMEOUT, universal_newlines=True)
    finally:
        shutil.rmtree(site_dir, ignore_errors=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("ROUTED ")]
    tail = " | ".join((p.stdout + p.stderr).strip().splitlines()[-8:])
    assert p.returncode == 0 and lines, "the script exited with status %d: %s" % (p.returncode, tail)
    return dict(field.split("=", 1) for field in lines[-1].split()[1:])


@case
def pth_file_is_one_guarded_line():
    with open(pth_file()) as f:
        lines = [ln.rstrip("\n") for ln in f if not ln.startswith("#")]
    assert lines == [PTH_LINE], "tcomms-torch.pth holds %r besides comments" % lines


@case
def hook_imports_nothing_at_start():
    """With TCOMMS_TORCH=1 a Python that never imports torch must not load torch (nor tcomms) at start-up."""
    site_dir = tempfile.mkdtemp(prefix="tcomms-site.")
    try:
        shutil.copy(pth_file(), os.path.join(site_dir, "tcomms-torch.pth"))
        code = ("import site, sys; site.addsitedir(%r); print(sorted(m for m in ('torch', 'tcomms') "
                "if m in sys.modules), 'tcomms_torch_hook' in sys.modules)" % site_dir)
        p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TCOMMS_TORCH="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, universal_newlines=True)
    finally:
        shutil.rmtree(site_dir, ignore_errors=True)
    assert p.returncode == 0 and p.stdout.strip() == "[] True", (p.returncode, p.stdout, p.stderr)


@case
def routed_with_tcomms_torch_1():
    got = run_script(True, ports()[0])
    assert got["checks"] == "ok", got
    assert got["world"] == "ProcessGroupTcomms", got
    assert got["backend"] == "gloo", "get_backend() says %r, the script asked for gloo" % got["backend"]
    assert got["tcomms_loaded"] == "True", got
    if RANK % 2 == 0:
        assert got["group"] == "ProcessGroupTcomms" and got["group_backend"] == "gloo", got


@case
def not_routed_without_tcomms_torch():
    got = run_script(False, ports()[1])
    assert got["checks"] == "ok", got
    assert got["world"] != "ProcessGroupTcomms", got
    assert got["backend"] == "gloo", got
    assert got["tcomms_loaded"] == "False", "tcomms was imported without TCOMMS_TORCH=1: %s" % got
    if RANK % 2 == 0:
        assert got["group"] != "ProcessGroupTcomms" and got["group_backend"] == "gloo", got


harness.main()
