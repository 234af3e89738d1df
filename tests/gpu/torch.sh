#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# PyTorch on tcomms on a GPU machine, from the repository root with a carried install (TCOMMS_GPU_PREFIX, default
# _gpu/install): tests/gpu/torch_cuda.py under torchrun on every GPU; bench/torch_bench.py checking all 12
# collectives through torch on tcomms; then, interleaved, torch.distributed on its own nccl and on tcomms
# (all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, 8 B to 1 GiB) and the FSDP2
# step of bench/fsdp2_step.py. Prints each case, the timing table and a summary.
#   TORCH_ROUNDS  interleaved rounds of each comparison (default 3)   TORCH_PARTS  tests,route,check,bench,fsdp
#   TORCH_BENCH_MAX  the largest size the bench part times (default 1G)
# route: tests/gpu/torch_routed.py, an unchanged script, with and without TCOMMS_TORCH=1, python/ added as a site
# directory so that python/tcomms-torch.pth takes effect as it does when installed.
set -u
prefix=${TCOMMS_GPU_PREFIX:-$PWD/_gpu/install}
export TCOMMS_LIBRARY=$prefix/lib/libtcomms.so.0 TCOMMS_BACKEND_PATH=$prefix/lib/tcomms
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
rounds=${TORCH_ROUNDS:-3}
parts=${TORCH_PARTS:-tests,route,check,bench,fsdp}
log=${OUT:-/tmp}/torch-gpu
mkdir -p "$log"
run() { python3 -m torch.distributed.run --nproc-per-node "$gpus" "$@"; }
echo "torch on tcomms: $gpus GPU(s), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)," \
     "$(python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())')," \
     "$(date -u '+%Y-%m-%d %H:%M UTC')"
status=0
if [[ $parts == *tests* ]]; then
    timeout 600 python3 -m torch.distributed.run --nproc-per-node "$gpus" tests/gpu/torch_cuda.py \
        >"$log/torch_cuda.log" 2>&1
    echo "torch_cuda.py exit $?"
    grep -ho 'RESULT [a-z0-9_]* \(ok\|FAIL\)' "$log/torch_cuda.log" | sort | uniq -c | sed 's/^/  /'
    grep -q 'RESULT .* FAIL' "$log/torch_cuda.log" && status=1
    grep -q 'RESULT' "$log/torch_cuda.log" || { tail -n 30 "$log/torch_cuda.log"; status=1; }
fi
if [[ $parts == *route* ]]; then
    for routed in 1 0; do
        TCOMMS_TORCH=$([ $routed = 1 ] && echo 1) timeout 300 python3 -m torch.distributed.run --nproc-per-node "$gpus" \
            --no-python python3 -c "import site, runpy, sys; site.addsitedir('$PWD/python'); sys.argv = ['x'];
runpy.run_path('$PWD/tests/gpu/torch_routed.py', run_name='__main__')" >"$log/routed-$routed.log" 2>&1
        echo "torch_routed.py with TCOMMS_TORCH=$routed: exit $?"
        grep -ho 'ROUTED .*' "$log/routed-$routed.log" | sed 's/^/  /'
        grep -q 'checks=ok' "$log/routed-$routed.log" || { tail -n 20 "$log/routed-$routed.log"; status=1; }
    done
fi
if [[ $parts == *check* ]]; then
    run bench/torch_bench.py all --backend tcomms -b 8 -e 8M -f 32 -n 2 -w 1 -c 1 >"$log/check.log" 2>&1
    echo "torch_bench --backend tcomms all -c 1: exit $?; wrong: $(grep -c 'FAILED' "$log/check.log") blocks failed"
    grep -E 'Out of bounds|Collective test starting' "$log/check.log" | paste - - | awk '{print "  " $5, $(NF)}'
fi
if [[ $parts == *bench* ]]; then
    for r in $(seq "$rounds"); do
        for b in nccl tcomms; do
            run bench/torch_bench.py all_reduce,all_gather,reduce_scatter,alltoall --backend $b -b 8 \
                -e "${TORCH_BENCH_MAX:-1G}" -f 8 -n 50 -w 10 -c 0 -J "$log/bench-$b-$r.json" \
                >"$log/bench-$b-$r.log" 2>&1 || echo "bench $b $r failed"
        done
    done
    python3 - "$log" "$rounds" <<'PY'
import json, statistics, sys
log, rounds = sys.argv[1], int(sys.argv[2])
t = {}
for b in ("nccl", "tcomms"):
    for r in range(1, rounds + 1):
        try:
            doc = json.load(open("%s/bench-%s-%d.json" % (log, b, r)))
        except OSError:
            continue
        for row in doc["results"]:
            t.setdefault((row["collective"], row["size"]), {}).setdefault(b, []).append(row["oop"]["time_us"])
print("%-15s %11s %11s %11s %7s" % ("collective", "bytes", "nccl us", "tcomms us", "ratio"))
for (c, size), v in sorted(t.items()):
    if len(v) < 2:
        continue
    a, b = statistics.median(v["nccl"]), statistics.median(v["tcomms"])
    print("%-15s %11d %11.2f %11.2f %7.3f" % (c, size, a, b, b / a if a else 0))
PY
fi
if [[ $parts == *fsdp* ]]; then
    for r in $(seq "$rounds"); do
        for b in nccl tcomms; do
            run bench/fsdp2_step.py --layers 8 --dim 8192 --tokens 8192 --reduce-dtype bf16 --steps 10 \
                --backend $b 2>&1 | grep -E '^fsdp_bench|Error|error' | head -n 3
        done
    done
fi
exit $status
