#!/bin/sh
# mesh-bench --device on the emulated device (MESH_DEVICE_EMU=1; the cuda table is hidden so
# that the run is the same on a machine with a GPU): every op validated on 2 and 4 ranks with
# device buffers on a stream (-c 1: the results, copied back to the host, are checked), the
# copy bound's column and the ratios printed for every row; -m emu alone; per axis of a grid;
# and the refusals: --device without a device table, -m cuda where only the emulated one is
# active.
. "$(dirname "$0")/lib.sh"
ops=allreduce,reduce,broadcast,reduce_scatter,allgather,alltoall,gather,scatter,sendrecv
export MESH_CUDA_DRIVER=/nonexistent/libcuda.so.1
unset MESH_DEVICE_EMU

# every data row: no wrong element out of place, none or N/A in place, a copy rate in GB/s (above
# zero from 8 KiB, where three decimals show it) and, with S > 0, two ratios that are numbers (or
# - where the row has no time)
rows_ok() {
    awk '!/^#/ && NF >= 17 {
        n++
        if ($9 != 0 || ($13 != 0 && $13 != "N/A")) bad++
        if ($14 !~ /^[0-9.]+$/ || ($1 >= 8192 && !($14 > 0))) bad++
        if ($1 > 0 && ($15 !~ /^[0-9.]+$/ || ($16 !~ /^[0-9.]+$/ && $16 != "-"))) bad++
    }
    END { print (n > 0 && bad == 0) ? n : "bad " bad + 0 " of " n + 0 }' "$1"
}

for n in 2 4; do
    MESH_DEVICE_EMU=1 "$MESHRUN" -n $n --timeout 180 "$BENCH" --device -o "$ops" \
        -d fp32,int8 -r sum,max -b 8 -e 64k -f 32 -n 2 -w 1 -c 1 >"$tmp/dev$n" 2>&1
    check "$n ranks, device buffers, every op validated" 0 $?
    check "$n ranks: no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$tmp/dev$n")"
    check "$n ranks: the table and the sharing named" 1 \
        "$(grep -c "^# device buffers of the emu table, on a stream; rank 0's device 0 is shared by $n of the $n ranks" \
            "$tmp/dev$n")"
    # tables: 2 dtypes x 2 redops for each of the 3 reductions, 2 dtypes for the 6 others
    check "$n ranks: a bound line per table" 24 "$(grep -c '^# rx/copy = bytes all ranks' "$tmp/dev$n")"
    check "$n ranks: the copy column in every table header" 24 \
        "$(grep -c '^#  *size .*#wrong  *copybw  *rx/copy  *rx/copy  *algo' "$tmp/dev$n")"
    check "$n ranks: allgather's bound is (n-1) S" "$((n - 1)) $((n - 1))" "$(awk '
        /^# [a-z_]+: [0-9]+ ranks? on/ { op = $2 }
        op == "allgather:" && match($0, /\([0-9.]+ x S/) {
            printf "%s%s", sep, substr($0, RSTART + 1, RLENGTH - 5); sep = " " }
        ' "$tmp/dev$n")"
    rows=$(rows_ok "$tmp/dev$n")
    check "$n ranks: every row checked with a copy rate and ratios" ok \
        "$(case $rows in bad*) echo "$rows" ;; *) echo ok ;; esac)"
done

"$MESHRUN" -n 2 --timeout 120 "$BENCH" -m emu -o allreduce,broadcast \
    -b 1k -e 1m -f 32 -n 2 -w 1 -c 1 >"$tmp/emu" 2>&1
check "-m emu enables the emulated device" 0 $?
check "-m emu: no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$tmp/emu")"
check "-m emu: allreduce's bound is 2(n-1) S" 1 \
    "$(grep -c '^# rx/copy = .*(2 x S / time)' "$tmp/emu")"

# per axis: both axes of a 2 x 2 grid, the bound counting the two groups that run at once
"$MESHRUN" -n 4 --timeout 120 "$BENCH" -m emu --mesh tp=2,dp=2 -o allgather -b 4k -e 64k -f 16 \
    -n 2 -w 1 -c 1 >"$tmp/axes" 2>&1
check "per axis on device buffers" 0 $?
check "per axis: no wrong element" 1 "$(grep -c '^# wrong elements: 0 OK' "$tmp/axes")"
check "per axis: tp and dp measured" "tp dp" \
    "$(awk '/^# axis [a-z]+: allgather/ { printf "%s%s", n++ ? " " : "", substr($3, 1, 2) }' \
        "$tmp/axes")"
check "per axis: the bound of two groups of 2 (2 x S)" 2 \
    "$(grep -c '^# rx/copy = bytes all ranks receive per second (2 x S / time)' "$tmp/axes")"

"$MESHRUN" -n 2 --timeout 60 "$BENCH" --device -b 8 -e 8 >"$tmp/none" 2>&1
check "--device without a device table fails" 1 $?
check "--device without a device table: the reason, on each rank" 2 \
    "$(grep -c '^error: rank [01]: -m device: no device table is active' "$tmp/none")"
"$BENCH" --device -b 8 -e 8 >"$tmp/none1" 2>&1
check "--device without a launcher or table fails" 1 $?
MESH_DEVICE_EMU=1 "$BENCH" -m cuda -b 8 -e 8 >"$tmp/cuda" 2>&1
check "-m cuda with the emulated table alone fails" 1 $?
check "-m cuda: the active table named" 1 \
    "$(grep -c '^error: rank 0: -m cuda: the active device table is emu' "$tmp/cuda")"
"$BENCH" -m gpu >/dev/null 2>&1
check "-m with an unknown type is a usage error" 2 $?

[ $fail = 0 ] || for f in dev2 dev4 emu axes none none1 cuda; do
    echo "--- $f"
    cat "$tmp/$f"
done
exit $fail
