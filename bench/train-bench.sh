#!/bin/sh
# Step time and tokens/s of mesh-train's ~12M-parameter GPT (6 layers, d_model 384, 8 heads,
# seq 128, vocab 4096, global batch 8) on every layout and ZeRO stage of this machine, then the
# share of the data-parallel communication hidden under the backward pass, overlap on against
# off, at dp=2 on one node and across 2 simulated nodes, and the step time of cp=2 with the ring
# attention's K/V exchange under the compute against without (cp2, cp2noov). Medians over the
# steps after the first.
#
#   bench/train-bench.sh [--steps N] [--layouts "one dp2 ..."] [--stages "0 1 2 3"]
#                        [--model "mesh-train options"] [--out DIR]
#
# Layouts: one dp2 dp4 tp2 tp4 tp2dp2 tp2dp2sp dp2nodes cp2 cp2noov (cp=2, ring attention,
# overlapped or --cp-no-overlap; cp2zz and cp2zznoov the same with --cp-zigzag). Ranks beyond
# the machine's cores share them, and so do other users: the load average is printed before and
# after.
# Writes DIR/train-bench.csv (layout,stage,overlap,ranks,nodes,step_ms,tokens_per_s,opt_ms)
# and DIR/train-bench.md (the tables).
#
# Hidden share: the optimizer step waits for whatever communication the backward pass did not
# cover, so (its time at dp=2 less its time at dp=1, where nothing is sent) is the exposed
# communication (stages 1-3 update half the parameters per rank at dp=2, so half the one-rank
# optimizer time is taken off there); hidden = 1 - exposed(overlap on) / exposed(overlap off).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
steps=6
layouts="one dp2 dp4 tp2 tp4 tp2dp2 tp2dp2sp dp2nodes cp2 cp2noov"
stages="0 1 2 3"
model="--layers 6 --d-model 384 --heads 8 --seq 128 --vocab 4096 --batch 8"
out=train-bench
. "$here/long_opts.sh"
long_opts train-bench 22 2 "steps layouts stages model out" "$@"
prog="$top/bench/mesh-train"
meshrun="$top/tools/meshrun"
[ -x "$prog" ] || { echo "train-bench: build bench/mesh-train first (needs OpenBLAS)" >&2; exit 1; }
mkdir -p "$out"
csv="$out/train-bench.csv"
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
echo "layout,stage,overlap,ranks,nodes,step_ms,tokens_per_s,opt_ms" >"$csv"

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# $(nproc) cores; load average before: $(load)"

# one LAYOUT STAGE OVERLAP: runs, appends a CSV row
one() {
    lay=$1 z=$2 ov=$3
    n=1 nodes="" mesh=""
    case $lay in
    one) n=1 ;;
    dp2) n=2 mesh="--mesh dp=2" ;;
    dp4) n=4 mesh="--mesh dp=4" ;;
    tp2) n=2 mesh="--mesh tp=2" ;;
    tp4) n=4 mesh="--mesh tp=4" ;;
    tp2dp2) n=4 mesh="--mesh tp=2,dp=2" ;;
    tp2dp2sp) n=4 mesh="--mesh tp=2,dp=2 --sequence-parallel" ;;
    dp2nodes) n=2 nodes="--nodes 2" mesh="--mesh dp=2" ;;
    cp2) n=2 mesh="--mesh cp=2" ;;
    cp2noov) n=2 mesh="--mesh cp=2 --cp-no-overlap" ;;
    cp2zz) n=2 mesh="--mesh cp=2 --cp-zigzag" ;;
    cp2zznoov) n=2 mesh="--mesh cp=2 --cp-zigzag --cp-no-overlap" ;;
    *) echo "train-bench: unknown layout $lay" >&2; exit 2 ;;
    esac
    flag=""
    [ "$ov" = off ] && flag="--no-overlap"
    # shellcheck disable=SC2086
    if ! res=$("$meshrun" -n $n $nodes --timeout 3000 "$prog" $model $mesh --zero "$z" $flag \
        --steps "$steps" --quiet 2>"$out/last-error.txt" | grep '^# median'); then
        echo "train-bench: $lay stage $z overlap $ov failed:" >&2
        head -3 "$out/last-error.txt" >&2
        return 0
    fi
    # "# median over K steps: step X ms, tokens/s Y, optimizer step (exposed communication) Z ms"
    echo "$res" | awk -v l="$lay" -v z="$z" -v o="$ov" -v n="$n" -v nd="${nodes:+2}" '{
        for (i = 1; i <= NF; i++) {
            if ($i == "step" && $(i+2) == "ms,") s = $(i+1)
            if ($i == "tokens/s") t = $(i+1)
            if ($i == "communication)") p = $(i+1)
        }
        sub(",", "", t)
        printf "%s,%s,%s,%s,%s,%s,%s,%s\n", l, z, o, n, nd ? nd : 1, s, t, p }' >>"$csv"
    tail -1 "$csv"
}

for lay in $layouts; do
    for z in $stages; do one "$lay" "$z" on; done
done
# overlap off against on, and the no-communication baseline
for z in $stages; do
    one dp2 "$z" off
    one dp2nodes "$z" off
done
echo "$layouts" | grep -qw one || one one 0 on
echo "# load average after: $(load)"

awk -F, -v steps="$steps" '
    NR == 1 { next }
    { key = $1 "," $2 "," $3; ms[key] = $6; tps[key] = $7; opt[key] = $8; lay[$1] = 1 }
    END {
        printf "| layout | ZeRO stage | step ms | tokens/s | optimizer step ms |\n"
        printf "|---|---|---|---|---|\n"
        n = split("one dp2 dp4 tp2 tp4 tp2dp2 tp2dp2sp dp2nodes cp2 cp2noov cp2zz cp2zznoov",
                  order, " ")
        for (i = 1; i <= n; i++) for (z = 0; z <= 3; z++) {
            k = order[i] "," z ",on"
            if (k in ms)
                printf "| %s | %d | %.0f | %.0f | %.0f |\n", order[i], z, ms[k], tps[k], opt[k]
        }
        base = opt["one,0,on"]
        printf "\n| layout | ZeRO stage | step ms on / off | exposed comm ms on / off | hidden |\n"
        printf "|---|---|---|---|---|\n"
        for (i = 1; i <= 2; i++) {
            l = i == 1 ? "dp2" : "dp2nodes"
            for (z = 0; z <= 3; z++) {
                on = l "," z ",on"; off = l "," z ",off"
                if (!(on in ms) || !(off in ms)) continue
                # the optimizer work itself: the whole buffer in stage 0, half of it at dp=2 above
                b = z == 0 ? base : base / 2
                eon = opt[on] - b; eoff = opt[off] - b
                if (eon < 0) eon = 0
                h = eoff > 0 ? 1 - eon / eoff : 0
                printf "| %s | %d | %.0f / %.0f | %.0f / %.0f | %.0f%% |\n", l, z, ms[on], ms[off],
                    eon, eoff, 100 * h
            }
        }
        # cp=2: the ring attention with its K/V exchange under the compute against without
        hdr = 0
        for (i = 1; i <= 2; i++) {
            l = i == 1 ? "cp2" : "cp2zz"
            for (z = 0; z <= 3; z++) {
                on = l "," z ",on"; off = l "noov," z ",on"
                if (!(on in ms) || !(off in ms)) continue
                if (!hdr++) {
                    printf "\n| layout | ZeRO stage | step ms ring overlap on / off | saved |\n"
                    printf "|---|---|---|---|\n"
                }
                printf "| %s | %d | %.0f / %.0f | %.0f%% |\n", l, z, ms[on], ms[off],
                    (ms[off] > 0 ? 100 * (1 - ms[on] / ms[off]) : 0)
            }
        }
    }' "$csv" | tee "$out/train-bench.md"
