#!/bin/sh
# mesh-train on a text corpus (--data: a folder of two files, one token per byte): 1 rank
# against dp=2, tp=2 and pp=2, 6 steps with the validation loss after steps 3 and 6:
#   - the train and the validation loss of each layout equal the 1-rank run's within 1e-4
#     relative (the windows depend on the seed, the step and the sample only);
#   - the corpus's unigram entropy is printed, the CSV has a val_loss column filled at steps 3
#     and 6 only, and with gnuplot a PNG lands beside the CSV;
# then --sample from the 1-rank checkpoint: 40 greedy bytes after the prompt on 1 rank and on
# dp=2 (the parameters gathered whole on rank 0) are the same text of the right length, drawn
# ones repeat with their seed, and --sample after training at pp=2 prints its 40 bytes; 64
# byte-pair merges (--bpe) at tp=2 against 1 rank, losses and sampling; --data
# refuses another --vocab, a missing path and a corpus too small for the split; --sample needs
# --data.
set -u
# b, prog, tmp and the helpers; skips when mesh-train is not built
. "$(dirname "$0")/train_lib.sh"
src=${srcdir:-.}
mkdir "$tmp/corpus"
cp "$src/README.md" "$tmp/corpus/a.md"
cp "$src/configure.ac" "$tmp/corpus/b.ac"
model="--layers 2 --d-model 32 --heads 4 --seq 32 --batch 8 --steps 6 --lr 3e-3 --quiet"
model="$model --data $tmp/corpus --val-every 3 --val-batches 2"
status=0

train one 1 -- --save "$tmp/ck" || exit 1
train dp2 2 -- --mesh dp=2 --zero 3 && same_loss dp2 one 1e-4 && same_column dp2 one 6 1e-4 3
train tp2 2 -- --mesh tp=2 && same_loss tp2 one 1e-4 && same_column tp2 one 6 1e-4 3
train pp2 2 -- --mesh pp=2 --microbatches 2 --sample 40 --prompt "mesh" &&
    same_loss pp2 one 1e-4 && same_column pp2 one 6 1e-4 3
echo "ok: dp=2, tp=2, pp=2 against 1 rank"
# 64 byte-pair merges learnt on rank 0 and broadcast: tp=2 splits the 320 tokens' table
train bpe1 1 -- --bpe 64 --sample 8
train bpe-tp2 2 -- --mesh tp=2 --bpe 64 --sample 8 && same_loss bpe-tp2 bpe1 1e-4 &&
    same_column bpe-tp2 bpe1 6 1e-4 3
grep -q "^# data .* 64 byte-pair merges learnt, .* nats per token" "$tmp/bpe1.out" ||
    fail "no corpus line with the merges"
grep -q "vocab=320 " "$tmp/bpe1.out" || fail "the vocabulary is not 256 + 64"
grep -q "^# sample: 8 tokens after a prompt of 4 bytes ([1-4] tokens), greedy" "$tmp/bpe1.out" ||
    fail "no sample with merges"
echo "ok: byte pairs, tp=2 against 1 rank"

grep -q "^# data $tmp/corpus: 2 files, .* unigram entropy [0-9.]* nats per byte" "$tmp/one.out" ||
    fail "no corpus line with the unigram entropy"
grep -q '^step,loss,grad_norm,time_ms,tokens_per_s,val_loss$' "$tmp/one.csv" ||
    fail "no val_loss column"
vals=$(awk -F, '/^[0-9]/ && $6 != "" { printf "%s%s", (n++ ? " " : ""), $1 }' "$tmp/one.csv")
[ "$vals" = "3 6" ] || fail "validation loss at steps '$vals', not '3 6'"
# the model learns: the train loss falls and the validation loss ends below the unigram entropy
# plus a margin a 6-step model reaches (a bigram model of this corpus is at about 2.4 nats)
awk -F, '/^[0-9]/ { if (!first) first = $2; last = $2 } END { exit !(last < first - 0.3) }' \
    "$tmp/one.csv" || fail "the train loss does not fall"
grep -q '^# final: step 6, train loss [0-9.]*, validation loss [0-9.]*' "$tmp/one.out" ||
    fail "no final line"
if command -v gnuplot >/dev/null 2>&1; then
    [ "$(od -An -tx1 -N4 "$tmp/one.png" 2>/dev/null | tr -d ' \n')" = 89504e47 ] ||
        fail "no PNG beside the CSV"
    grep -q "^# plot: $tmp/one.png\$" "$tmp/one.out" || fail "the plot is not reported"
fi
echo "ok: entropy, val_loss column, plot"

# sample_text NAME: the generated text (between the header and the end line) with its newline
sample_text() {
    awk '/^# end of sample$/ { f = 0 } f { print } /^# sample: / { f = 1 }' "$tmp/$1.out"
}
bytes() { sample_text "$1" | wc -c | tr -d ' '; }
train s1 1 -- --load "$tmp/ck" --sample 40 --prompt "The "
train s2 2 -- --mesh dp=2 --load "$tmp/ck" --sample 40 --prompt "The "
[ "$(bytes s1)" = 45 ] || fail "1 rank sampled $(bytes s1) bytes, not 4 + 40 + a newline"
sample_text s2 >"$tmp/s2.text"
sample_text s1 | cmp -s - "$tmp/s2.text" || fail "greedy text differs on dp=2"
sample_text s1 | head -c 4 | grep -q '^The $' || fail "the text does not start with the prompt"
grep -q "^# sample: 40 tokens after a prompt of 4 bytes (4 tokens), greedy" "$tmp/s1.out" || fail "no greedy header"
[ "$(bytes pp2)" = 45 ] || fail "pp=2 sampled $(bytes pp2) bytes, not 4 + 40 + a newline"
grep -q '^[0-9]' "$tmp/s1.csv" && fail "sampling from the checkpoint's step trained"
for k in 1 2; do
    train t$k 1 -- --load "$tmp/ck" --sample 40 --temperature 1 --sample-seed 7
done
# drawn bytes may be any of 256 (NUL too): compared as files
for k in t1 t2 s1; do sample_text $k >"$tmp/$k.text"; done
[ "$(bytes t1)" = 45 ] && cmp -s "$tmp/t1.text" "$tmp/t2.text" ||
    fail "drawn text does not repeat with its seed"
cmp -s "$tmp/t1.text" "$tmp/s1.text" && fail "temperature 1 gives the greedy text"
echo "ok: sampling"

refused "--data with 0 merges: --vocab is 256, not 64" 1 --vocab 64
refused "--data $tmp/none: No such file" 1 --data "$tmp/none"
printf 'tiny' >"$tmp/tiny"
refused "each needs a window of --seq 32 + 1" 2 --mesh dp=2 --data "$tmp/tiny"
model="--steps 2 --quiet"
refused "--sample needs --data" 1 --sample 10
refused "--bpe needs --data" 1 --bpe 10
exit $status
