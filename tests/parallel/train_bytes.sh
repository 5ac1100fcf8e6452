#!/bin/sh
# mesh-train --comm-report: the bytes each axis moves per step equal the formulas of
# docs/mesh-train.md ("Bytes per axis"), exactly, at every step, on 8 ranks: a tiny GPT (2 layers,
# d_model 16, 4 heads, seq 16, vocab 32, global batch 8 in 2 micro-batches, 3 steps, fp32,
# ZeRO 1) as
#   - tp=2 pp=2 dp=2 (1f1b): tp's all-reduces, pp's activations and the tied table, dp's
#     reduce-scatter and all-gather, the norm's all-reduces;
#   - tp=2 cp=2 dp=2: cp's ring of K/V blocks and their gradients, ZeRO over cp x dp;
#   - ep=2 dp=4 with 4 experts, top 2, dropless (global batch 16): the count exchange, the
#     dispatch and combine of the rows from other ep ranks (as many as the routing's sources say)
#     with their source slots, the dense and the experts' optimizers, the router statistics;
# the report's figures are the bytes every rank handed to the transports on the axis's
# communicators, summed over the ranks; the collectives run the ring algorithm (MESH_TUNE) so
# that the sums do not depend on the algorithm chosen. Also: the report off, no columns.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
export MESH_TUNE="allreduce:ring,reduce_scatter:ring,allgather:ring"
L=2 C=16 H=4 T=16 V=32 B=8 M=2
model="--layers $L --d-model $C --heads $H --seq $T --vocab $V --batch $B --microbatches $M"
model="$model --steps 3 --quiet --zero 1 --comm-report"
status=0

# column NAME COL: the CSV column named COL, one line per step
column() {
    awk -F, -v want="$2" '/^#/ { next }
        $1 == "step" { for (i = 1; i <= NF; i++) if ($i == want) c = i; next }
        { print $c }' "$tmp/$1.csv"
}

# expect NAME AXIS BYTES: every step's AXIS_bytes equals BYTES
expect() {
    got=$(column "$1" "$2_bytes" | sort -u | tr '\n' ' ')
    if [ "$got" != "$3 " ]; then
        fail "$1: $2 bytes per step $got, formula $3"
    else
        echo "ok: $1: $2 $3 bytes per step"
    fi
}

# zero_bytes NAME: the ZeRO flat buffers' bytes summed over the ranks and their groups' size,
# dense then experts
zero_bytes() {
    sed -n 's/.*flat buffers \([0-9]*\) bytes .* groups of \([0-9]*\) (experts: \([0-9]*\) bytes in groups of \([0-9]*\)).*/\1 \2 \3 \4/p' \
        "$tmp/$1.csv"
}

# ring all-reduce of R bytes over n ranks: 2 (n - 1) R summed over the ranks;
# reduce-scatter and all-gather: (n - 1) R each
W=8

# --- tp=2 pp=2 dp=2 ---------------------------------------------------------------------------
t=2 p=2 d=2
bm=$((B / (M * d)))    # samples per micro-batch on a rank
A=$((bm * T * C * 4)) # one micro-batch's activations [b, T, C]
train tp2pp2dp2 8 -- --mesh tp=2,pp=2,dp=2 || exit 1
# per micro-batch per pipeline: 4L + 2 all-reduces of A (each block's two region ends forward
# and backward, the embedding forward, the head's input backward) and the loss's row max and
# row sums (3 b T floats)
expect tp2pp2dp2 tp $((W / (t * p) * M * 2 * (t - 1) * ((4 * L + 2) * A + 3 * bm * T * 4)))
# per micro-batch per stage boundary A forward and A backward; the tied token table's shard
# (V / t x C) both ways between the first and the last stage
expect tp2pp2dp2 pp $((W / p * ((p - 1) * M * 2 * A + 2 * (V / t) * C * 4)))
# shellcheck disable=SC2046 # the figures, one word each
set -- $(zero_bytes tp2pp2dp2)
n=$2
# reduce-scatter and all-gather of the flat buffer; the squared norm (one double) over dp
expect tp2pp2dp2 dp $(($1 / n * 2 * (n - 1) + W / n * 2 * (n - 1) * 8))
# the squared norm over tp x pp (4 ranks)
expect tp2pp2dp2 norm $((W / (t * p) * 2 * (t * p - 1) * 8))
expect tp2pp2dp2 cp 0
expect tp2pp2dp2 ep 0

# --- tp=2 cp=2 dp=2 ---------------------------------------------------------------------------
t=2 c=2 d=2
bm=$((B / (M * d)))
A=$((bm * T / c * C * 4)) # a cp rank holds T / c positions
train tp2cp2dp2 8 -- --mesh tp=2,cp=2,dp=2 || exit 1
# and the squared norm over tp (the optimizer's tp x pp is tp alone)
expect tp2cp2dp2 tp $((W / t * M * 2 * (t - 1) * ((4 * L + 2) * A + 3 * bm * T / c * 4) +
    W / t * 2 * (t - 1) * 8))
# per layer and micro-batch on each rank: its K/V block [b, T/c, C/t] x 2 sent c - 1 times
# forward and c - 1 times backward, the dK/dV sums c times
kv=$((2 * bm * T / c * C / t * 4))
expect tp2cp2dp2 cp $((W * L * M * (3 * c - 2) * kv))
# shellcheck disable=SC2046 # the figures, one word each
set -- $(zero_bytes tp2cp2dp2)
n=$2
expect tp2cp2dp2 dp $(($1 / n * 2 * (n - 1) + W / n * 2 * (n - 1) * 8))
expect tp2cp2dp2 norm 0
expect tp2cp2dp2 pp 0

# --- ep=2 dp=4, 4 experts, top 2, in block 1, dropless, global batch 16 -------------------------
E=4 K=2 P=2
train ep2dp4 8 -- --mesh ep=2,dp=4 --experts $E --topk $K --batch 16 || exit 1
# per routing (a micro-batch's MoE block on a rank): the count exchange, (E/P + 6) int64 to each
# other ep rank; per expert row from another ep rank (ep_remote_rows, from the routing) the
# dispatch, the combine and their backward passes (4 C bytes each) and its source slot (one
# int64); the experts' squared norm over etp x ep, which is ep here (one double)
awk -F, -v W=$W -v M=$M -v P=$P -v E=$E -v C=$C '
    $1 == "step" { for (i = 1; i <= NF; i++) c[$i] = i; next }
    /^[0-9]/ {
        rows = $c["ep_remote_rows"]
        want = rows * (16 * C + 8) + W * M * (P - 1) * 8 * (E / P + 6) + W / P * 2 * (P - 1) * 8
        if ($c["ep_bytes"] != want || rows == 0) {
            printf "ep2dp4: step %s: ep bytes %s, formula %d (%d remote rows)\n", $1,
                $c["ep_bytes"], want, rows
            bad++
        }
        n++
    }
    END { exit bad > 0 || n != 3 }' "$tmp/ep2dp4.csv" || fail "ep2dp4: ep bytes"
[ $status = 0 ] && echo "ok: ep2dp4: ep bytes per step as the routing's remote rows say"
# shellcheck disable=SC2046 # the figures, one word each
set -- $(zero_bytes ep2dp4)
n=$2 ne=$4
# the dense flat buffer over dp x ep (8), the experts' over edp (4), each with its norm; the
# router's statistics (2 E doubles) over dp x ep per routing
expect ep2dp4 dp $(($1 / n * 2 * (n - 1) + W / n * 2 * (n - 1) * 8 + $3 / ne * 2 * (ne - 1) +
    W / ne * 2 * (ne - 1) * 8 + M * W / n * 2 * (n - 1) * 2 * E * 8))
expect ep2dp4 tp 0
expect ep2dp4 norm 0

# --- the report off: no columns -----------------------------------------------------------------
model=$(echo "$model" | sed 's/ --comm-report//')
train off 8 -- --mesh tp=2,pp=2,dp=2 || exit 1
grep -q "tp_bytes" "$tmp/off.csv" && fail "off: comm columns without --comm-report"
[ $status = 0 ] && echo "all mesh-train byte checks passed"
exit $status
