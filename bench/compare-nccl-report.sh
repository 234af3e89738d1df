# SPDX-License-Identifier: BSD-3-Clause
# compare-nccl-report.sh: the Markdown report of bench/compare-nccl, sourced by it: the issue's targets first (busbw
# ratio at >= 64 MiB, time difference at 8 B-64 KiB, small all_reduce with registered or symmetric buffers against
# raw NCCL's default path), then per-size tables of each side against raw NCCL. Reads $work/medians (compare.sh's
# cmp_medians: "side coll size median_us") and the caller's variables; `label SIDE` names a side.
# shellcheck shell=sh disable=SC2154 # work, sides, colls, nranks, ...: the caller's

# Insertion sort of a[1..n] (POSIX awk has no asort) and the median of a sorted a[1..n].
nccl_awk_sort='function sort(a, n,   i, j, v) { for (i = 2; i <= n; i++) { v = a[i]
        for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v } }
    function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'

# One row per side (raw NCCL aside) and collective: the worst busbw ratio at >= 64 MiB and the worst time
# difference at 8 B-64 KiB, with the sizes where they occur, means/medians, and whether the target is met.
nccl_targets() {
    echo "| side | collective | busbw / raw at >= 64 MiB: min (size) | mean | >= 0.99 | time - raw (us) at 8 B-64 KiB: max (size) | median | <= +1 us |"
    echo "|---|---|---:|---:|:---:|---:|---:|:---:|"
    for side in $sides; do
        [ "$side" != nccl-raw ] || continue
        for coll in $colls; do
            awk -v a="$side" -v name="$(label "$side")" -v c="$coll" -v N="$nranks" "$cmp_awk_lib
                $nccl_awk_sort"'
                $2 != c { next } $1 == a { x[$3] = $4 } $1 == "nccl-raw" { y[$3] = $4 }
                END {
                    for (s in x) {
                        if (!(s in y) || x[s] <= 0 || y[s] <= 0) continue
                        if (s + 0 >= 67108864) {
                            r = y[s] / x[s]; sum += r
                            if (++nb == 1 || r < rmin) { rmin = r; rat = s + 0 }
                        }
                        if (s + 0 <= 65536) {
                            d = x[s] - y[s]; dd[++nd] = d
                            if (nd == 1 || d > dmax) { dmax = d; dat = s + 0 }
                        }
                    }
                    sort(dd, nd)
                    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, c,
                        nb ? sprintf("%.3f (%s)", rmin, hsize(rat)) : "-", nb ? sprintf("%.3f", sum / nb) : "-",
                        nb ? (rmin >= 0.99 ? "yes" : "no") : "-",
                        nd ? sprintf("%+.2f (%s)", dmax, hsize(dat)) : "-", nd ? sprintf("%+.2f", median(dd, nd)) : "-",
                        nd ? (dmax <= 1 ? "yes" : "no") : "-"
                }' "$work/medians"
        done
    done
}

# all_reduce at 8 B-64 KiB: the time of raw NCCL's default path and of each side that registers buffers (and of
# plain tcomms), with ratios to raw; the last row gives the largest ratio over the sizes (target <= 0.8).
nccl_small_allreduce() {
    present=''
    for side in nccl-raw tcomms-nccl tcomms-nccl-R1 tcomms-nccl-R2 nccl-raw-R1 nccl-raw-R2; do
        case " $sides " in *" $side "*) present="$present $side" ;; esac
    done
    names=''
    for side in $present; do names="$names;$(label "$side")"; done
    awk -v list="${present# }" -v names="${names#;}" -v N="$nranks" "$cmp_awk_lib
        $nccl_awk_sort"'
        $2 == "all_reduce" && $3 + 0 <= 65536 { t[$1, $3 + 0] = $4; if (!(($3 + 0) in seen)) { seen[$3 + 0] = 1; sz[++ns] = $3 + 0 } }
        END {
            n = split(list, side, " "); split(names, name, ";")
            if (n < 2 || side[1] != "nccl-raw" || ns == 0) { print "(no all_reduce below 64 KiB with raw NCCL and another side)"; exit }
            sort(sz, ns)
            line = "| size"; rule = "|---:"
            for (i = 1; i <= n; i++) { line = line " | " name[i] " (us)"; rule = rule "|---:" }
            for (i = 2; i <= n; i++) { line = line " | " name[i] " / raw"; rule = rule "|---:" }
            print line " |"; print rule "|"
            for (k = 1; k <= ns; k++) {
                s = sz[k]; line = "| " hsize(s)
                for (i = 1; i <= n; i++) line = line " | " (((side[i], s) in t) ? num(t[side[i], s]) : "-")
                for (i = 2; i <= n; i++) {
                    ok = ((side[i], s) in t) && ((side[1], s) in t) && t[side[1], s] > 0
                    r = ok ? t[side[i], s] / t[side[1], s] : 0
                    line = line " | " (ok ? sprintf("%.3f", r) : "-")
                    if (ok && (!(i in worst) || r > worst[i])) worst[i] = r
                }
                print line " |"
            }
            line = "| largest ratio (target <= 0.8 for -R 1 / -R 2)"
            for (i = 1; i <= n; i++) line = line " |"
            for (i = 2; i <= n; i++)
                line = line " | " ((i in worst) ? sprintf("%.3f %s", worst[i], worst[i] <= 0.8 ? "yes" : "no") : "-")
            print line " |"
        }' "$work/medians"
}

nccl_report() {
    echo "# tcomms vs raw NCCL and torch.distributed: $nranks GPU(s)"
    echo
    echo "- $(date -u +%Y-%m-%dT%H:%MZ); $gpus x $gpu; tcomms commit $commit"
    echo "- NCCL: nccl_bench ran on ${ncclver:-an unknown version}; tcomms' NCCL module loads ${modnccl:-libnccl.so.2 (not resolved here)}${torchver:+; torch $torchver brings its own}"
    echo "- sizes $minb to $maxb (factor $factor), $dtype, -z $blocking, $iters iterations after $warmup warm-ups,"
    echo "  median of $runs interleaved round(s); out-of-place times; NVLink SHARP as the machine sets it (NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset})"
    if [ "$graph" -gt 0 ]; then
        echo "- -G $graph: each size's $iters iterations captured once in a CUDA graph, $graph replays timed: GPU time per"
        echo "  call, without the host's cost of launching it"
    fi
    if [ "$checked" = 1 ]; then
        echo "- checked runs (-c 1, up to $checkmax): see the status below; timed rounds ran with -c 0"
    fi
    printf -- "- sides:"
    for side in $sides; do printf " %s (\`%s\`);" "$(label "$side")" "$side"; done
    echo
    case " $sides " in *" nccl-raw-again "*)
        echo "- raw NCCL again (--raw-twice) is the same raw program run a second time each round: its rows below are"
        echo "  the spread of the measurement itself, the floor under every other side's ratio to raw NCCL" ;;
    esac
    echo
    echo "## Targets of issue 5"
    echo
    echo "### Each side against raw NCCL (cudaMalloc buffers, NCCL's default path)"
    echo
    nccl_targets
    echo
    echo "### Small all_reduce: registered (-R 1) and symmetric (-R 2) buffers against raw NCCL's default path"
    echo
    nccl_small_allreduce
    echo
    echo "## Per size"
    for side in $sides; do
        [ "$side" != nccl-raw ] || continue
        cmp_table "$side" "$(label "$side")" nccl-raw "raw NCCL" "$nranks"
    done
}
