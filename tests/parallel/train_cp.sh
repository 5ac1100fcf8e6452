#!/bin/sh
# mesh-train with context parallelism beside the other axes, against one process: a tiny GPT
# (4 layers, d_model 16, 4 heads, seq 16, vocab 32, global batch 8 in 4 micro-batches, 4 steps,
# fp32), the sequence split over cp=2 ranks (ring attention on each tp rank's heads):
#   - tp=2 cp=2, with sequence parallelism and zig-zag sharding, and tp=2 cp=2 dp=2 over 2
#     simulated nodes (each tp pair in a node, cp and dp across them);
#   - cp=2 pp=2 under every schedule (afab, 1f1b, interleaved, zb1, zbv: each cp rank runs its
#     own pipeline of the stages' cp peers), cp=2 pp=2 dp=2 interleaved and tp=2 cp=2 pp=2 zb1
#     with sequence parallelism, each over 2 simulated nodes (pp across them);
#   - with 4 experts, top 2, in blocks 1 and 3 with the balance loss, dropless, global batch 16:
#     cp=2 (every expert on each rank), cp=2 ep=2, cp=2 ep=2 dp=2 over 2 simulated nodes, tp=2
#     cp=2 ep=2 with sequence parallelism and cp=2 pp=2 ep=2 (1f1b): each cp rank's tokens routed
#     through the expert dispatch, the balance loss counted over dp x ep x cp and equal to the
#     1-rank run's within 1e-4 relative, nothing dropped;
#   - the five axes at once on 16 ranks over 2 simulated nodes: tp=2 cp=2 pp=2 ep=2 (the dense
#     layers data-parallel over ep x cp, the experts over ep) with sequence parallelism, zb1,
#     ZeRO 1, experts as above;
# under ZeRO stages 0-3 among them, the loss and the gradient norm of each step equal the 1-rank
# run's within 1e-4 relative; the largest relative difference of the loss is printed.
# MESH_TEST_SANITIZED=1 keeps tp=2 cp=2 with sequence parallelism, cp=2 pp=2 1f1b, cp=2 ep=2
# and the refusals.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
model="--layers 4 --d-model 16 --heads 4 --seq 16 --vocab 32 --batch 8 --microbatches 4"
model="$model --steps 4 --lr 3e-3 --quiet"
status=0
steps_expected=4

# layout NAME RANKS [meshrun options --] mesh-train options: against REF (1 rank)
layout() {
    name=$1
    train "$@" || return 1
    grep -q "cp=2" "$tmp/$name.out" || fail "$name: not a cp=2 run"
    same_loss "$name" "${ref:-ref}" 1e-4
    same_column "$name" "${ref:-ref}" 3 1e-4 # the gradient norm: every gradient reduced
    echo "ok: $name (largest relative difference $(worst "$name" "${ref:-ref}"))"
}

schedules="afab 1f1b interleaved zb1 zbv"
moe_layouts="cp2-moe cp2ep2 cp2ep2dp2-nodes tp2cp2ep2-sp cp2pp2ep2 tp2cp2pp2ep2-nodes"
sanitized=${MESH_TEST_SANITIZED:-0}
if [ "$sanitized" = 1 ]; then
    schedules=1f1b
    moe_layouts=cp2ep2
fi

train ref 1 -- || exit 1
# cp inside tp: each tp rank's heads over its cp ring
layout tp2cp2sp 4 -- --mesh tp=2,cp=2 --sequence-parallel --zero 0
grep -q 'sp=1' "$tmp/tp2cp2sp.out" || fail "tp2cp2sp: not sequence parallel"
if [ "$sanitized" != 1 ]; then
    layout tp2cp2 4 -- --mesh tp=2,cp=2 --zero 1
    layout tp2cp2sp-zz 4 -- --mesh tp=2,cp=2 --sequence-parallel --cp-zigzag --zero 3
    layout tp2cp2dp2-nodes 8 --nodes 2 -- --mesh tp=2,cp=2,dp=2 --zero 2
    grep -q 'nodes=2' "$tmp/tp2cp2dp2-nodes.out" || fail "tp2cp2dp2-nodes did not span 2 nodes"
fi

# cp inside a pipeline: the stages pass each cp rank's chunk of the sequence
for s in $schedules; do
    z=0
    [ "$s" = zbv ] && z=1
    layout "cp2pp2-$s" 4 -- --mesh cp=2,pp=2 --schedule "$s" --zero "$z"
    grep -q "pp=2 schedule=$s" "$tmp/cp2pp2-$s.out" || fail "cp2pp2-$s: not a $s pipeline"
done
if [ "$sanitized" != 1 ]; then
    layout cp2pp2dp2-nodes 8 --nodes 2 -- --mesh cp=2,pp=2,dp=2 --schedule interleaved --zero 1
    layout tp2cp2pp2-sp-nodes 8 --nodes 2 -- --mesh tp=2,cp=2,pp=2 --sequence-parallel \
        --schedule zb1
    for lay in cp2pp2dp2-nodes tp2cp2pp2-sp-nodes; do
        grep -q 'nodes=2' "$tmp/$lay.out" || fail "$lay did not span 2 nodes"
    done
fi

# cp with a mixture of experts: each cp rank's positions routed like any other tokens
moe="--experts 4 --topk 2 --aux-loss 0.01 --moe-layers 1,3 --batch 16"
ref="ref-moe"
# shellcheck disable=SC2086
if train ref-moe 1 -- $moe; then
    # shellcheck disable=SC2086
    for lay in "cp2-moe 2 -- --mesh cp=2 --zero 3" "cp2ep2 4 -- --mesh cp=2,ep=2 --zero 2" \
        "cp2ep2dp2-nodes 8 --nodes 2 -- --mesh cp=2,ep=2,dp=2 --zero 1" \
        "tp2cp2ep2-sp 8 -- --mesh tp=2,cp=2,ep=2 --sequence-parallel --zero 0" \
        "cp2pp2ep2 8 -- --mesh cp=2,pp=2,ep=2 --schedule 1f1b --zero 1" \
        "tp2cp2pp2ep2-nodes 16 --nodes 2 -- --mesh tp=2,cp=2,pp=2,ep=2 --sequence-parallel \
            --schedule zb1 --zero 1"; do
        set -- $lay
        case " $moe_layouts " in *" $1 "*) ;; *) continue ;; esac
        layout "$@" $moe || continue
        same_column "$1" ref-moe 6 1e-4 # the balance loss
        same_column "$1" ref-moe 7 0    # dropped choices: none
    done
    grep -q 'experts=4' "$tmp/cp2ep2.out" || fail "cp2ep2: no experts in its header"
    if [ "$sanitized" != 1 ]; then
        for lay in cp2ep2dp2-nodes tp2cp2pp2ep2-nodes; do
            grep -q 'nodes=2' "$tmp/$lay.out" || fail "$lay did not span 2 nodes"
        done
        grep -q 'tp=2 dp=1 pp=2 schedule=zb1 .*cp=2 .*ep=2 .*sp=1 .*ranks=16' \
            "$tmp/tp2cp2pp2ep2-nodes.out" ||
            fail "tp2cp2pp2ep2-nodes: not the five axes on 16 ranks"
    fi
fi
ref="ref"

# the loss falls: the reference learns
awk -F, '/^[0-9]/ { if (!first) first = $2; last = $2 }
    END { exit !(last < first - 0.01) }' "$tmp/ref.csv" || fail "reference loss does not fall"

refused "seq / cp (with --sequence-parallel) 6 does not split evenly across tp=4" 8 \
    --mesh tp=4,cp=2 --sequence-parallel --seq 12
refused "cp=2 with --capacity: the capacity keeps an ep group's first tokens" 4 \
    --mesh cp=2,ep=2 --experts 4 --capacity 1.0
echo "ok: refusals"
[ $status = 0 ] && echo "all mesh-train context-parallel checks passed"
exit $status
