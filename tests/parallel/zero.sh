#!/bin/sh
# The ZeRO layer against its single-process reference (tests/parallel/zero_test.c): every stage
# on 1, 2, 3 and 4 ranks and on 2 simulated nodes, fp32 and bf16, AdamW and SGD, micro-batches,
# overlap on and off, the global norm clipped over a tp=2 and a pp=2 grid; the bytes sent on dp
# per step and the memory by category against the formulas; checkpoints saved at dp=4 stage 2
# loaded at dp=2 stage 3 and dp=1 stage 0 (the continued run equals the uninterrupted one), and
# checkpoints that must not load. MESH_TEST_SANITIZED=1 runs a smaller set.
set -u
b=${top_builddir:-.}
export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
export MESH_LOG_LEVEL=${MESH_LOG_LEVEL:-error}
prog="$b/tests/parallel/zero_test"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
sanitized=${MESH_TEST_SANITIZED:-0}
status=0
run() {
    desc=$1
    shift
    if out=$("$b/tools/meshrun" --timeout 300 "$@" 2>&1); then
        echo "ok: $desc"
    else
        echo "FAIL: $desc"
        printf '%s\n' "$out" | head -40
        status=1
    fi
}
# The byte counts assume the ring algorithms: recursive doubling (chosen for small vectors)
# sends log2(d) times the vector instead of (d-1)/d of it.
ring=allreduce:ring,reduce_scatter:ring,allgather:ring
bytes() {
    desc=$1
    shift
    MESH_TUNE=$ring run "$desc" "$@"
}

run "dp=1, micro-batches" -n 1 "$prog" --micro 2
run "dp=2, 3 micro-batches, reductions under the backward pass" -n 2 "$prog" --micro 3 \
    --bucket 1024 --check-overlap
run "dp=4, bf16, micro-batches" -n 4 "$prog" --dtype bf16 --micro 2
run "dp=4, one reduction in flight at a time, micro-batches" -n 4 "$prog" --micro 2 \
    --bucket 1024 --inflight 1
run "dp=3, 3 reductions in flight, reductions under the backward pass" -n 3 "$prog" \
    --bucket 1024 --inflight 3 --check-overlap
run "dp=2 across 2 nodes, micro-batches" -n 2 --nodes 2 "$prog" --micro 2
run "tp=2 x dp=2, norm clipped over tp (replicated tensors once)" -n 4 "$prog" --mp tp --clip 5
# bytes and memory: a large tensor keeps the padding small, 2 steps of 4 samples keep it short
big="--big --steps 2 --batch 4"
bytes "dp=2: bytes per step and memory" -n 2 "$prog" --bytes --memory $big
bytes "dp=4: bytes per step and memory, bf16" -n 4 "$prog" --bytes --memory $big --dtype bf16
if [ "$sanitized" != 1 ]; then
    run "dp=3, overlap off: nothing sent before the micro-batch ends" -n 3 "$prog" --overlap 0 \
        --bucket 1024 --check-overlap
    run "dp=2, bf16" -n 2 "$prog" --dtype bf16
    run "dp=4, sgd with momentum, no ready marks" -n 4 "$prog" --opt sgd --no-ready --micro 2
    run "pp=2 x dp=2, norm clipped over pp (tied tensor once)" -n 4 "$prog" --mp pp --clip 5
    bytes "dp=2 across 2 nodes: bytes per step" -n 2 --nodes 2 "$prog" --bytes $big
    bytes "dp=4: bytes per step and memory, sgd" -n 4 "$prog" --bytes --memory $big --opt sgd
fi

# checkpoints: saved at dp=4 stage 2 after step 5, loaded elsewhere, continued to step 10
ck="$tmp/ck"
run "dp=4 stage 2: save at step 5" -n 4 "$prog" --stages 2 --save "$ck" --save-at 5 \
    --final "$tmp/final.bin"
run "dp=2 stage 3 loads it and continues" -n 2 "$prog" --stages 3 --load "$ck" --start 5 \
    --compare "$tmp/final.bin"
run "dp=1 stage 0 loads it and continues" -n 1 "$prog" --stages 0 --load "$ck" --start 5 \
    --compare "$tmp/final.bin"
if [ "$sanitized" != 1 ]; then
    run "dp=4 stage 1 loads it and continues" -n 4 "$prog" --stages 1 --load "$ck" --start 5 \
        --compare "$tmp/final.bin"
fi

# with a tp=2 grid each tp rank has its files; the norm is clipped over tp before and after
run "tp=2 x dp=2 stage 2: save at step 5" -n 4 "$prog" --mp tp --clip 5 --stages 2 \
    --save "$tmp/cktp" --save-at 5 --final "$tmp/finaltp.bin"
run "tp=2 x dp=1 stage 3 loads it and continues" -n 2 "$prog" --mp tp --clip 5 --stages 3 \
    --load "$tmp/cktp" --start 5 --compare "$tmp/finaltp.bin"

# bf16, saved before the first step: the master weights of parameters the model wrote itself
run "dp=2 stage 1 bf16: save before the first step" -n 2 "$prog" --stages 1 --dtype bf16 \
    --save "$tmp/ck0" --save-at 0 --final "$tmp/final0.bin"
run "dp=4 stage 3 bf16 loads it" -n 4 "$prog" --stages 3 --dtype bf16 --load "$tmp/ck0" \
    --start 0 --compare "$tmp/final0.bin"

# checkpoints that must not load: every rank fails naming the file and tensor, nothing changes
bad() {
    desc=$1
    shift
    run "$desc" -n 2 "$prog" --stages 1 "$@"
}
bad "a tensor missing from the checkpoint" --load "$ck" --variant extra \
    --expect-load-error "has no tensor 'extra'"
bad "a checkpoint tensor not registered" --load "$ck" --variant missing \
    --expect-load-error "tensor 'h2.proj' of the checkpoint is not registered"
bad "a shape mismatch" --load "$ck" --variant shape \
    --expect-load-error "tensor 'emb' has shape [37,11] in the checkpoint, [11,37] registered"
cp -r "$ck" "$tmp/short"
size=$(wc -c < "$tmp/short/shard-mp0-dp1.bin")
head -c $((size - 100)) "$ck/shard-mp0-dp1.bin" > "$tmp/short/shard-mp0-dp1.bin"
want="short/shard-mp0-dp1.bin is truncated: $((size - 100)) bytes, $size expected"
bad "a truncated shard" --load "$tmp/short" --expect-load-error "$want; tensor 'head' lies past its end"
cp -r "$ck" "$tmp/gone"
rm "$tmp/gone/shard-mp0-dp2.bin"
bad "a missing shard" --load "$tmp/gone" \
    --expect-load-error "cannot open $tmp/gone/shard-mp0-dp2.bin"
cp -r "$ck" "$tmp/index"
head -n 20 "$ck/index-mp0.txt" > "$tmp/index/index-mp0.txt"
bad "a truncated index" --load "$tmp/index" \
    --expect-load-error "index-mp0.txt line 21: unexpected end of file"
bad "a checkpoint of another model-parallel size" --load "$tmp/cktp" \
    --expect-load-error "index-mp0.txt is model-parallel rank 0 of 2, this is rank 0 of 1"
exit $status
