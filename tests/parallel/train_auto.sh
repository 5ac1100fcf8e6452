#!/bin/sh
# mesh-train --mesh auto: the layout from the planner. The tiny GPT of train.sh (2 layers,
# d_model 32, 4 heads, seq 16, vocab 64, global batch 8, 10 steps) on 2 ranks, 4 ranks, 4 ranks
# over 2 simulated nodes, and 4 ranks with pp=2 given; then two where the planner's model says
# cp and ep pay: 64-token sequences with a batch of 2 on 4 ranks (cp=2 dp=2, ahead of tp=2 and
# pp=2), and 4 experts on 4 ranks (ep=2 dp=2, ahead of dp=4 and ep=4):
#   - the loss of each step equals the 1-rank run within 1e-4 relative;
#   - the printed tp, pp, dp, ZeRO stage, cp, ep and micro-batches are those tools/mesh-plan
#     ranks first for the same model, CPU cluster and restrictions (no recomputation, no
#     sequence parallelism, even stages);
# a request nothing fits (pp=4 for 2 layers) is refused with the planner's reason.
# MESH_TEST_SANITIZED=1 keeps 2 ranks, 4 ranks over 2 nodes and the refusal.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
plan="$b/tools/mesh-plan"
model="--layers 2 --d-model 32 --heads 4 --seq 16 --vocab 64 --batch 8 --steps 10 --lr 3e-3 --quiet"
pmodel="layers=2,hidden=32,heads=4,seq=16,vocab=64,tied=1,dropout=0"
status=0
steps_expected=10

# first_plan FILE: "tp=A pp=B dp=C zero=Z cp=C ep=E microbatches=M STEP" of mesh-plan --json's
# first layout
first_plan() {
    n='\([-0-9.e+]*\)'
    grep -m1 '^ *{"tp":' "$1" | sed -n "s/.*\"tp\": $n, \"cp\": $n, \"ep\": $n,.*\"dp\": $n, \
\"pp\": $n,.*\"zero\": $n, \"mbs\": $n, \"micro_batches\": $n,.*\"step_s\": $n,.*/tp=\1 pp=\5 \
dp=\4 zero=\6 cp=\2 ep=\3 microbatches=\8 \9/p"
}

# expect NAME GPUS PER_NODE [FIX [MODEL [BATCH]]]: mesh-plan's choice as mesh-train makes it:
# every ZeRO stage (under a pipeline 2 and 3 reduce and gather once per step, as mesh-train
# runs them), stages of layers / pp blocks (even=1)
expect() {
    name=$1
    common="--model ${5:-$pmodel} --cluster cpu,gpus=$2,gpus-per-node=$3 --batch-seqs ${6:-8}"
    common="$common --recompute none --no-sp --json"
    fix="${4:+$4,}even=1"
    # shellcheck disable=SC2086
    "$plan" $common --fix "$fix" >"$tmp/$name.plan" 2>&1
    line=$(first_plan "$tmp/$name.plan")
    if [ -z "$line" ]; then # said by check_plan, outside this subshell
        echo "$name: mesh-plan gave no layout:" >&2
        cat "$tmp/$name.plan" >&2
    fi
    echo "${line% *}"
}

# check_plan NAME GPUS PER_NODE [FIX [MODEL [BATCH]]]: mesh-train printed mesh-plan's choice
check_plan() {
    want=$(expect "$@")
    k='[0-9]*'
    axes="tp=$k pp=$k dp=$k zero=$k cp=$k ep=$k"
    got=$(sed -n "s/^# plan: \($axes\).* \(microbatches=$k\):.*/\1 \2/p" "$tmp/$1.out")
    if [ -z "$want" ] || [ "$got" != "$want" ]; then
        fail "$1: mesh-train chose [$got], mesh-plan [$want]"
        head -3 "$tmp/$1.out"
    else
        echo "ok: $1: $got, as mesh-plan"
    fi
    grep -q '^# plan: .*predicted step [0-9.]* ms' "$tmp/$1.out" ||
        fail "$1: no predicted step time"
    grep -q '^# why: ' "$tmp/$1.out" || fail "$1: no reasons"
}

cases="auto2 auto4 auto4nodes auto4pp2 autocp automoe"
[ "${MESH_TEST_SANITIZED:-0}" = 1 ] && cases="auto2 auto4nodes automoe"
# the cp case: 64-token sequences, 2 of them a step; the MoE case: 4 experts of ffn 128, top 2,
# on block 1 (mesh-train's default: the odd blocks)
cpopts="--seq 64 --batch 2"
cpmodel="layers=2,hidden=32,heads=4,seq=64,vocab=64,tied=1,dropout=0"
moeopts="--experts 4 --topk 2 --expert-ffn 128"
moemodel="$pmodel,experts=4,top-k=2,expert-ffn=128,dense-layers=1"

train one 1 || exit 1
for c in $cases; do
    ref=one
    case $c in
    auto2) train "$c" 2 -- --mesh auto && check_plan "$c" 2 2 ;;
    auto4) train "$c" 4 -- --mesh auto && check_plan "$c" 4 4 ;;
    auto4nodes) train "$c" 4 --nodes 2 -- --mesh auto && check_plan "$c" 4 2 ;;
    auto4pp2) train "$c" 4 -- --mesh auto,pp=2 && check_plan "$c" 4 4 pp=2 ;;
    autocp)
        ref=onecp
        # shellcheck disable=SC2086
        train onecp 1 -- $cpopts && train "$c" 4 -- $cpopts --mesh auto &&
            check_plan "$c" 4 4 "" "$cpmodel" 2 ;;
    automoe)
        ref=onemoe
        # shellcheck disable=SC2086
        train onemoe 1 -- $moeopts && train "$c" 4 -- $moeopts --mesh auto &&
            check_plan "$c" 4 4 "" "$moemodel" ;;
    esac
    [ -f "$tmp/$c.csv" ] && same_loss "$c" "$ref" 1e-4
done
for c in autocp:cp=2 automoe:ep=2; do
    case " $cases " in *" ${c%%:*} "*) ;; *) continue ;; esac
    grep -q "^# plan: .* ${c#*:} " "$tmp/${c%%:*}.out" 2>/dev/null ||
        fail "${c%%:*}: the planner did not choose ${c#*:}"
done
grep -q '^# plan: .* pp=2 .*schedule=' "$tmp/auto4pp2.out" 2>/dev/null ||
    [ "${MESH_TEST_SANITIZED:-0}" = 1 ] || fail "auto4pp2: no pipeline schedule chosen"

# nothing fits: refused on every rank with the planner's reason, before any step
# shellcheck disable=SC2086
if "$b/tools/meshrun" -n 4 --timeout 60 "$prog" $model --mesh auto,pp=4 >"$tmp/none.out" 2>&1; then
    fail "pp=4 for 2 layers was accepted"
elif ! grep -q 'mesh-train: --mesh auto: the planner finds no layout .*pp=4 exceeds the 2 layers' \
    "$tmp/none.out"; then
    fail "pp=4 for 2 layers: no reason"
    cat "$tmp/none.out"
else
    echo "ok: nothing fits: $(grep -m1 'mesh-train:' "$tmp/none.out")"
fi
grep -q '^step\|^# plan' "$tmp/none.out" && fail "pp=4: training started"
exit $status
