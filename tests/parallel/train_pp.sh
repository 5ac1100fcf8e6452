#!/bin/sh
# mesh-train with pipeline parallelism against one process: a tiny GPT (8 layers, d_model 16,
# 2 heads, seq 8, vocab 32, 2 samples per micro-batch, 10 steps, fp32) split over pp=2 and pp=4
# stages under every schedule: afab, 1f1b, zb1 and zbv with m = p and m = 2p + 1; interleaved
# with two chunks per rank and m = p and m = 2p (the smallest and the next its rules allow);
# tp=2 pp=2 with sequence parallelism under zb1; and the 3D layout tp=2 pp=2 dp=2 with ZeRO-1
# on 8 ranks over 2 simulated nodes (pp across them):
#   - the loss of each step equals the 1-rank run of the same global batch within 1e-4
#     relative;
# layouts that do not divide and the options a pipeline does not take are refused (ZeRO 2 and 3
# under pp: train_pp_zero.sh).
# MESH_TEST_SANITIZED=1 keeps three pp=2 runs (1f1b, interleaved, tp=2 zb1) and the refusals.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
model="--layers 8 --d-model 16 --heads 2 --seq 8 --vocab 32 --steps 10 --lr 3e-3 --quiet"
status=0
steps_expected=10

# pipe P SCHEDULE M [options]: pp=P with M micro-batches of 2 samples against one process
pipe() {
    p=$1 s=$2 mb=$3
    shift 3
    batch=$((2 * mb))
    [ -f "$tmp/ref$batch.csv" ] || train "ref$batch" 1 -- --batch "$batch" || return 1
    name="pp$p-$s-m$mb"
    train "$name" "$p" -- --mesh "pp=$p" --schedule "$s" --microbatches "$mb" --batch "$batch" \
        "$@" || return 1
    grep -q "pp=$p schedule=$s" "$tmp/$name.out" || fail "$name: not a pp=$p $s run"
    same_loss "$name" "ref$batch" 1e-4
    echo "ok: $name"
}

# tp=2 inside the stages with sequence parallelism (the stages exchange each tp rank's part of
# the sequence) under the split backward of zb1
tp_sp_zb1() {
    mb=$1 batch=$((2 * $1))
    [ -f "$tmp/ref$batch.csv" ] || train "ref$batch" 1 -- --batch "$batch" || return 1
    train "tp2sp-pp2-zb1-m$mb" 4 -- --mesh tp=2,pp=2 --sequence-parallel --schedule zb1 \
        --microbatches "$mb" --batch "$batch" || return 1
    same_loss "tp2sp-pp2-zb1-m$mb" "ref$batch" 1e-4
    echo "ok: tp=2 pp=2 sequence parallel zb1 m=$mb"
}

if [ "${MESH_TEST_SANITIZED:-0}" = 1 ]; then
    pipe 2 1f1b 5
    pipe 2 interleaved 2
    tp_sp_zb1 2
else
    tp_sp_zb1 5
    for p in 2 4; do
        for s in afab 1f1b zb1; do
            pipe "$p" "$s" "$p"
            pipe "$p" "$s" $((2 * p + 1))
        done
        pipe "$p" interleaved "$p"
        pipe "$p" interleaved $((2 * p))
        pipe "$p" zbv "$p" # the first and the last stage on one rank: the tied table unshared
        pipe "$p" zbv $((2 * p + 1))
    done
    # 3D: tp pairs inside a node, dp inside a node, the two pp stages on different nodes
    [ -f "$tmp/ref16.csv" ] || train ref16 1 -- --batch 16
    if train 3d 8 --nodes 2 -- --mesh tp=2,pp=2,dp=2 --zero 1 --schedule 1f1b \
        --microbatches 4 --batch 16; then
        grep -q 'tp=2 dp=2 pp=2 schedule=1f1b.* zero=1 .*ranks=8 nodes=2' "$tmp/3d.out" ||
            fail "3d: not tp=2 dp=2 pp=2 zero=1 on 8 ranks over 2 nodes"
        same_loss 3d ref16 1e-4
        echo "ok: tp=2 pp=2 dp=2 ZeRO-1, 2 nodes"
    fi
fi

refused "layers 6 does not split into pp=4 x 1 chunks" 4 --mesh pp=4 --layers 6 --batch 4 \
    --microbatches 4
refused "layers 8 does not split into pp=2 x 3 chunks" 2 --mesh pp=2 --schedule interleaved \
    --chunks 3 --batch 4 --microbatches 4
refused "schedule interleaved with pp=2, --microbatches 3" 2 --mesh pp=2 \
    --schedule interleaved --batch 6 --microbatches 3
refused "schedule gpipe2" 2 --mesh pp=2 --schedule gpipe2
refused "need --mesh pp=P" 1 --schedule 1f1b
refused "dump-params is not available with pp" 2 --mesh pp=2 --dump-params "$tmp/x"
echo "ok: refusals"
[ $status = 0 ] && echo "all mesh-train pipeline checks passed"
exit $status
