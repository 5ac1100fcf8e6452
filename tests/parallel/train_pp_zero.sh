#!/bin/sh
# mesh-train with ZeRO stages 2 and 3 under pipeline parallelism against one process: a tiny GPT
# (4 layers, d_model 16, 2 heads, seq 8, vocab 32, global batch 16 in 4 micro-batches, 4 steps,
# fp32) on pp=2 dp=2 under every schedule (afab, 1f1b, interleaved, zb1, zbv), on tp=2 pp=2 dp=2
# and on pp=2 dp=4 with dp outermost (across the nodes) under 1f1b, interleaved and zbv, each
# over 2 simulated nodes with --zero 2 and --zero 3 (and 0 and 1 under one schedule each), and
# with 4 experts on pp=2 ep=2 (1f1b with stage 3, zbv with stage 2):
#   - the loss of each step equals the 1-rank run within 1e-4 relative;
#   - but with experts, rank 0 sends 2 (d-1)/d x its stage's padded parameter bytes on dp per
#     step (stage 0: an all-reduce; stages 1-3: one reduce-scatter of the gradients after the
#     stage's last backward or weight pass and one all-gather of the parameters, after the
#     optimizer in stages 1 and 2, before the first forward pass in stage 3), whatever the
#     micro-batches, plus at most 256 bytes (the norm's all-reduce), the same at every step.
# MESH_TEST_SANITIZED=1 keeps pp=2 dp=2 under 1f1b and zbv.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
model="--layers 4 --d-model 16 --heads 2 --seq 8 --vocab 32 --steps 4 --lr 3e-3 --batch 16 --quiet"
status=0
steps_expected=4

# dp_bytes NAME: rank 0's dp bytes per step against 2 (d-1)/d x padded x element bytes
dp_bytes() {
    awk -v name="$1" '/^# dp bytes sent per step by rank 0:/ {
            seen = 1
            for (i = 1; i <= NF; i++)
                if (split($i, kv, "=") == 2) { sub(/;$/, "", kv[2]); v[kv[1]] = kv[2] + 0 }
            lo = v["min"]; hi = v["max"]; padded = v["padded"]; es = v["element_bytes"]; d = v["dp"]
            want = 2 * (d - 1) / d * padded * es
            if (lo != hi) { printf "%s: %s to %s dp bytes over the steps\n", name, lo, hi; bad++ }
            if (lo < want || lo > want + 256) {
                printf "%s: %s dp bytes per step, formula %.0f (+ 256 at most)\n", name, lo, want
                bad++
            }
        }
        END { if (!seen) printf "%s: no dp bytes line\n", name; exit !seen || bad > 0 }' \
        "$tmp/$1.out" || fail "$1: dp bytes per step"
}

# run NAME RANKS MESH SCHEDULE STAGE [mesh-train options]: against the 1-rank curve (REF,
# default ref)
run() {
    name=$1 n=$2 mesh=$3 s=$4 z=$5 before=$status
    shift 5
    status=0
    train "$name" "$n" --nodes 2 -- --mesh "$mesh" --schedule "$s" --microbatches 4 \
        --zero "$z" "$@" || { status=1; return 1; }
    grep -q "pp=2 schedule=$s.* zero=$z .*ranks=$n nodes=2" "$tmp/$name.out" ||
        fail "$name: not a $mesh $s zero=$z run on $n ranks over 2 nodes"
    same_loss "$name" "${REF:-ref}" 1e-4
    # with experts the balance loss's figures are summed over dp too
    [ -n "${REF:-}" ] || dp_bytes "$name"
    [ $status = 0 ] &&
        echo "ok: $name (largest relative difference $(worst "$name" "${REF:-ref}" %.2g))"
    status=$((status | before))
}

# pp=2 ep=2 with 4 experts, top 2, in both blocks: the dense layers' optimizer over dp x ep, the
# experts' over the expert data-parallel group (one rank); the 1-rank run has the same
# micro-batches, over which the balance loss is counted
moe() {
    REF=ref-moe
    # shellcheck disable=SC2086
    run "pp2ep2-$1-z$2" 4 pp=2,ep=2 "$1" "$2" $experts
    REF=
}

experts="--experts 4 --topk 2"
train ref 1 -- || exit 1
if [ "${MESH_TEST_SANITIZED:-0}" = 1 ]; then
    for z in 2 3; do
        run "pp2dp2-1f1b-z$z" 4 pp=2,dp=2 1f1b "$z"
        run "pp2dp2-zbv-z$z" 4 pp=2,dp=2 zbv "$z"
    done
else
    for z in 2 3; do
        for s in afab 1f1b interleaved zb1 zbv; do
            run "pp2dp2-$s-z$z" 4 pp=2,dp=2 "$s" "$z"
        done
        for s in 1f1b interleaved zbv; do
            run "tp2pp2dp2-$s-z$z" 8 tp=2,pp=2,dp=2 "$s" "$z"
            run "pp2dp4-$s-z$z" 8 pp=2,dp=4 "$s" "$z" --order tp-cp-ep-pp-dp
        done
    done
    # stages 0 and 1 on each layout, for the bytes: the same formula
    for z in 0 1; do
        run "pp2dp2-1f1b-z$z" 4 pp=2,dp=2 1f1b "$z"
        run "tp2pp2dp2-zbv-z$z" 8 tp=2,pp=2,dp=2 zbv "$z"
        run "pp2dp4-interleaved-z$z" 8 pp=2,dp=4 interleaved "$z" --order tp-cp-ep-pp-dp
    done
    # shellcheck disable=SC2086
    if train ref-moe 1 -- $experts --microbatches 4; then
        moe 1f1b 3
        moe zbv 2
    fi
fi
[ $status = 0 ] && echo "all mesh-train ZeRO 2 and 3 pipeline checks passed"
exit $status
