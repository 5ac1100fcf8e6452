#!/bin/sh
# mesh-plan: a plan and its JSON, --check of layouts that fit, cannot run and do not fit,
# nothing fitting, --from-topo on saved topologies (GPU node, CPU node, unknown GPU),
# calibration from mesh-bench's CSV and its comparison, bad input refused with the reason.
b=${top_builddir:-.}
s=${top_srcdir:-.}
plan="$b/tools/mesh-plan"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2] got [$3]"; fail=1; fi
}
has() { # has DESC FILE TEXT
    if grep -qF -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: no [$3] in:"; cat "$2"; fail=1; fi
}
run() { # run OUT ARGS...: status in $rc, stdout and stderr in OUT
    out=$1
    shift
    "$plan" "$@" >"$out" 2>&1
    rc=$?
}

run "$tmp/help" --help
check "--help exits 0" 0 $rc
has "--help names --check" "$tmp/help" "--check LAYOUT"
run "$tmp/o" --bogus
check "unknown option exits 2" 2 $rc
run "$tmp/o" --list-models
has "presets listed with their source" "$tmp/o" "arXiv 2407.21783"

# a plan: ranked layouts, the reasons, the rejected ones
run "$tmp/plan" --model gpt3-175b --cluster a100-80g,gpus=1024 --top 3
check "plan exits 0" 0 $rc
has "first layout" "$tmp/plan" "#1  tp="
has "third layout" "$tmp/plan" "#3  tp="
has "memory by category" "$tmp/plan" "memory params"
has "per-axis table" "$tmp/plan" "axis  size  nodes      bytes/step"
has "tp explained" "$tmp/plan" "TP inside the node"
has "rejected with the reason" "$tmp/plan" "tp=16 spans nodes of 8 GPUs"
if [ "$(grep -c '^#[0-9]' "$tmp/plan")" != 3 ]; then
    echo "FAIL: --top 3 shows $(grep -c '^#[0-9]' "$tmp/plan") layouts"
    fail=1
fi
run "$tmp/json" --model gpt3-175b --cluster a100-80g,nodes=128 --top 2 --json
check "--json exits 0" 0 $rc
has "json fits" "$tmp/json" '"fits": true'
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert d["cluster"]["gpus"] == 1024 and len(d["layouts"]) == 2, d["cluster"]
for l in d["layouts"]:
    assert l["tp"] * l["cp"] * l["ep"] * l["dp"] * l["pp"] == 1024
    assert l["memory_gib"]["total"] <= l["memory_gib"]["limit"]
    assert l["tp"] <= 8 and l["axes"]["tp"]["nodes"] == 1
assert d["layouts"][0]["step_s"] <= d["layouts"][1]["step_s"]' "$tmp/json"
    check "json is valid and consistent" 0 $?
fi

# --check: fits; cannot run; does not fit
run "$tmp/o" --model gpt3-175b --cluster a100-80g,gpus=1024 --check tp=8,pp=8,zero=1
check "--check of a good layout exits 0" 0 $rc
has "it fits" "$tmp/o" "fits: tp=8,pp=8,zero=1"
has "the knobs not named are chosen" "$tmp/o" "zero=1 mbs="
run "$tmp/o" --model gpt3-175b --cluster a100-80g,gpus=1024 --check tp=64
check "--check of tp=64 exits 1" 1 $rc
has "heads do not divide" "$tmp/o" "heads 96 are not divisible by tp=64"
run "$tmp/o" --model gpt3-175b --cluster a100-80g,gpus=1024 --check tp=8,zero=0
check "--check of a layout too large exits 1" 1 $rc
has "by how much" "$tmp/o" "does not fit: tp=8,zero=0: exceeds memory by"
run "$tmp/o" --model gpt3-175b --cluster a100-80g,gpus=1024 --check tp=16,pp=8
has "tp across nodes is said" "$tmp/o" "tp=16 spans nodes of 8 GPUs"

# the first and last pipeline stages hold the embedding and the output layer: Llama 3 405B's
# 126 layers on 16 stages as Meta balanced them; 128 leave the last stage heavier
run "$tmp/o" --model llama3-405b --cluster h100,gpus=8192 --check tp=8,pp=16
check "llama3 pp=16 fits" 0 $rc
has "7 layers on the first and last stages" "$tmp/o" \
    "stages 7 to 8 layers: first 7 (and the embedding), last 7 (and the output layer and loss"
has "the head's work and the imbalance" "$tmp/o" "0.63 layers of work); slowest stage +1.1% over"
run "$tmp/o" --model llama3-405b,layers=128 --cluster h100,gpus=8192 --check tp=8,pp=16 --json
has "128 layers: 8 everywhere" "$tmp/o" \
    '"stage_layers": [8, 8], "stage_layers_first": 8, "stage_layers_last": 8,'
has "the last stage 7.4% over" "$tmp/o" '"head_layers": 0.6326, "stage_imbalance": 0.0738'

# cp where the sequence is long; ep across nodes, hierarchical: DeepSeek-V3 with its pp=16 and
# tp=1 keeps ep inside a node (ep=4, then ep=8), ep=16 over 2 nodes third; with ep=16 fixed each
# token crosses once per node of its experts
run "$tmp/o" --model llama3-70b,seq=32768 --cluster h100,nodes=32 --batch 16m --top 1
has "cp chosen for 32K sequences" "$tmp/o" "#1  tp=4 cp=8 ep=1 etp=4 dp=8 pp=1"
has "cp explained" "$tmp/o" "cp=8: CP for the long sequence: 32768 tokens split 8 ways"
run "$tmp/o" --model deepseek-v3 --cluster h800,gpus=2048 --fix tp=1,pp=16,cp=1 --top 3
check "deepseek pp=16 exits 0" 0 $rc
has "ep=4 inside one node first" "$tmp/o" "#1  tp=1 cp=1 ep=4 etp=1 dp=32 pp=16"
has "ep=8 second" "$tmp/o" "#2  tp=1 cp=1 ep=8 etp=1 dp=16 pp=16"
has "ep=16 across 2 nodes third" "$tmp/o" "#3  tp=1 cp=1 ep=16 etp=1 dp=8 pp=16"
has "hierarchical dispatch said" "$tmp/o" "ep     spans 2 nodes: hierarchical dispatch"
run "$tmp/o" --model deepseek-v3 --cluster h800,gpus=2048 --fix tp=1,pp=16,ep=16 --top 1
has "ep explained" "$tmp/o" \
    "all-to-all across 2 nodes, hierarchical: a token crosses once to each node of its experts"
run "$tmp/o" --model deepseek-v3,route-nodes=0 --cluster h800,gpus=2048 \
    --check tp=1,pp=16,ep=64,etp=1 --json
has "published EP64 over 8 nodes, hierarchical" "$tmp/o" '"ep_hierarchical": true'
has "over 8 nodes" "$tmp/o" '"ep": {"nodes": 8,'

# nothing fits: the reason, exit 1
run "$tmp/o" --model llama3-405b --cluster a100-40g,gpus=8
check "nothing fits exits 1" 1 $rc
has "nothing fits" "$tmp/o" "nothing fits:"
has "by how much" "$tmp/o" "exceeds memory by"

# --from-topo on saved topologies
MESH_TOPO_FILE="$s/tests/fixtures/topo/dgx8.xml" run "$tmp/o" --model llama3-70b --from-topo \
    --nodes 4 --batch 4m --top 1
check "dgx node exits 0" 0 $rc
has "H100 node seen" "$tmp/o" "this node: 8 x NVIDIA H100 80GB HBM3 (figures of preset h100)"
has "four nodes" "$tmp/o" "32 GPUs, 8 per node (4 nodes)"
MESH_TOPO_FILE="$s/tests/fixtures/topo/cpuonly.xml" run "$tmp/o" \
    --model layers=4,hidden=256,heads=8,vocab=1000,seq=128 --from-topo --batch-seqs 16 --top 1
check "cpu node exits 0" 0 $rc
has "no GPU said" "$tmp/o" "this node has no GPU: planning for 4 CPU ranks per node (one per core)"
MESH_TOPO_FILE="$s/tests/fixtures/topo/pcie4.xml" run "$tmp/o" --model llama2-7b --from-topo
check "unknown GPU refused" 2 $rc
has "unknown GPU named" "$tmp/o" "GPU 'GA102GL [RTX A6000]' is not one mesh-plan knows"
MESH_TOPO_FILE="$s/tests/fixtures/topo/pcie4.xml" run "$tmp/o" --model llama2-7b --from-topo \
    --cluster gpu-mem=48,flops=150,intra-bw=20,inter-bw=10 --nodes 2 --top 1
check "unknown GPU with its figures" 0 $rc

# calibration: the curves, a comparison with itself, and with a run twice as slow
csv="$s/tests/fixtures/plan/bench-tp2dp2pp2.csv"
run "$tmp/o" --calibrate "$csv"
check "--calibrate alone exits 0" 0 $rc
has "tp all-reduce curve" "$tmp/o" "tp       allreduce           2     1"
has "pp send/recv across nodes" "$tmp/o" "pp       sendrecv            2     2"
run "$tmp/o" --calibrate "$csv" --compare "$csv"
check "a run predicts itself" 0 $rc
has "all within" "$tmp/o" "54 of 54 within 25%"
awk -F, 'NR == 1 { print; next } { $7 = $7 * 2; print }' OFS=, "$csv" >"$tmp/slow.csv"
run "$tmp/o" --calibrate "$csv" --compare "$tmp/slow.csv"
check "twice as slow is off" 1 $rc
has "off by half" "$tmp/o" "-50.0%  over"
run "$tmp/o" --model layers=4,hidden=256,heads=8,vocab=1000,seq=128 \
    --cluster cpu,gpus=8,gpus-per-node=4 --batch-seqs 16 --calibrate "$csv" --top 1 --fix tp=2
check "calibrated plan exits 0" 0 $rc
has "tp timed from the measurements" "$tmp/o" "    tp       2      1"
has "calibrated axis" "$tmp/o" "calibrated"

# bad input: refused with the reason, exit 2
run "$tmp/o" --model layers=0,hidden=256,heads=8,vocab=100,seq=64 --cluster h100,gpus=8
check "bad model exits 2" 2 $rc
has "field named" "$tmp/o" "layers 0 must be at least 1"
run "$tmp/o" --model nosuch --cluster h100,gpus=8
check "unknown preset exits 2" 2 $rc
has "preset named" "$tmp/o" "model 'nosuch' is not a preset"
run "$tmp/o" --model llama3-8b --cluster h100,gpus=8 --batch 1000
check "batch not whole sequences exits 2" 2 $rc
has "batch reason" "$tmp/o" "not a whole number of 8192-token sequences"
run "$tmp/o" --model llama3-8b --cluster h100,gpus=12 --batch 1m
check "bad cluster exits 2" 2 $rc
has "cluster reason" "$tmp/o" "gpus 12 is not a multiple of gpus-per-node 8"
run "$tmp/o" --model llama3-8b --cluster h100,gpus=8 --batch 1m --check tp=8,pipeline=2
check "bad layout key exits 2" 2 $rc
has "key named" "$tmp/o" "unknown key 'pipeline'"
run "$tmp/o" --calibrate /nonexistent.csv
check "missing calibration exits 2" 2 $rc
has "file named" "$tmp/o" "cannot read /nonexistent.csv"
exit $fail
