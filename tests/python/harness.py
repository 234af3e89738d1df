# SPDX-License-Identifier: BSD-3-Clause
"""The multi-rank Python test harness: every rank runs the registered cases in order and prints one line per case,
"RESULT <case> ok" or "RESULT <case> FAIL <reason>"; tests/python/run.sh runs a file under tcomms-run for each
backend and rank count its header names, and a case passes where every rank printed ok.

A case is a function decorated with @case; it checks real results against references it computes itself
(in float64 or by a plain loop) and raises AssertionError (or anything else) on a wrong one.
TCOMMS_TEST_CASES=a,b runs only those cases.
"""
import os
import sys
import traceback

CASES = []
RANK = int(os.environ.get("TCOMMS_RANK", os.environ.get("RANK", "0")))
SIZE = int(os.environ.get("TCOMMS_SIZE", os.environ.get("WORLD_SIZE", "1")))
BACKEND = os.environ.get("TCOMMS_BACKEND", "")


def case(fn):
    CASES.append(fn)
    return fn


def main():
    only = [c for c in os.environ.get("TCOMMS_TEST_CASES", "").split(",") if c]
    failed = 0
    for fn in CASES:
        if only and fn.__name__ not in only:
            continue
        try:
            fn()
            print("RESULT %s ok" % fn.__name__, flush=True)
        except BaseException as e:  # noqa: BLE001 - a case's failure is reported, the next case runs
            failed += 1
            reason = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
            print("RESULT %s FAIL %s" % (fn.__name__, " | ".join(reason.strip().splitlines())), flush=True)
            if isinstance(e, KeyboardInterrupt):
                break
    sys.stdout.flush()
    sys.exit(1 if failed else 0)
