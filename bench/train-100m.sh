#!/bin/sh
# mesh-train at about 100M parameters on 8 ranks of this machine: 12 layers, d_model 768, 12
# heads, seq 256, vocab 16384 (97.8M parameters, the head tied to the token table), by default
# as tp=2 pp=2 dp=2, ZeRO 1, 1f1b over 2 micro-batches of 1 sample per dp rank (global batch 4,
# 1024 tokens a step), fp32, with --comm-report: step time, tokens/s, bytes and exposed time per
# axis, peak memory per rank against the model's own account; then the planner's prediction for
# the same layout (tools/mesh-plan --check on CPU ranks, fp32, stages of layers / pp blocks as
# mesh-train splits them). The ranks share the machine's cores with whatever else runs: the
# load average is printed before and after.
#
#   bench/train-100m.sh [--steps N] [--mesh SIZES] [--zero N] [--schedule S] [--batch N]
#                       [--microbatches M] [--model "mesh-train options"] [--out DIR]
#
# e.g. --mesh tp=2,dp=4 --zero 2 --microbatches 1, or --mesh pp=2,dp=4 --zero 3 --batch 8.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
steps=3
mesh=tp=2,pp=2,dp=2
zero=1
schedule=1f1b
batch=4
microbatches=2
model="--layers 12 --d-model 768 --heads 12 --seq 256 --vocab 16384"
out=train-100m
. "$here/long_opts.sh"
long_opts train-100m 13 2 "steps mesh zero schedule batch microbatches model out" "$@"
prog="$top/bench/mesh-train"
[ -x "$prog" ] || { echo "train-100m: build bench/mesh-train first (needs OpenBLAS)" >&2; exit 1; }
# the axis sizes of --mesh (1 when not named; dp the rest of the 8 ranks)
size() { echo ",$mesh," | sed -n "s/.*,$1=\([0-9]*\),.*/\1/p" | grep . || echo 1; }
tp=$(size tp) pp=$(size pp) cp=$(size cp)
dp=$((8 / (tp * pp * cp)))
mbs=$((batch / (dp * microbatches)))
sched=
if [ "$pp" -gt 1 ]; then sched="--schedule $schedule"; fi
mkdir -p "$out"
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
# shellcheck disable=SC2086
"$top/tools/meshrun" -n 8 --timeout 3000 "$prog" $model --batch "$batch" \
    --microbatches "$microbatches" --mesh "$mesh" --zero "$zero" $sched --steps "$steps" \
    --comm-report --csv "$out/train-100m.csv" | tee "$out/train-100m.out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
check="$mesh,zero=$zero,mbs=$mbs,even=1"
[ "$pp" -gt 1 ] && check="$check,schedule=$schedule"
"$top/tools/mesh-plan" --model layers=12,hidden=768,heads=12,vocab=16384,seq=256,tied=1 \
    --cluster cpu,gpus=8,gpus-per-node=8 --batch $((batch * 256)) --check "$check" \
    --recompute none --no-sp | tee "$out/plan.out"
