# Shared by the tests of one network transport between 2 simulated nodes (conf_*.sh,
# fault_*.sh); sourced with top_builddir set. It sets b, run and prog, and provides:
#   net_need NET          exit 77 unless mesh-info -t lists NET as usable here
#   net_routes NET        fail unless each of 4 ranks on 2 nodes reaches the other node's two
#                         ranks over NET (8 routes)
#   net_one NET COLL ALGO [conformance options]
#                         one conformance run with ALGO forced; prints a line, sets status=1
#                         when the run fails or the algorithm never ran
#   net_each NET [conformance options]
#                         net_one for every registered algorithm of every collective, with
#                         the options given, else the reductions in int32 and fp16 and the
#                         others in every dtype
b=${top_builddir:-.}
run="$b/tools/meshrun"
prog="$b/tests/mp/conformance"
net_args="-n 4 --nodes 2 --timeout 300"
status=0

net_need() {
    "$b/tools/mesh-info" -t 2>/dev/null | grep -q "^$1  *usable here" && return 0
    echo "$1 not built or not usable here: skipped"
    exit 77
}

net_routes() {
    routes=$(MESH_LOG_LEVEL=debug MESH_LOG_SUBSYS=comm "$run" $net_args "$prog" -o barrier -q 2>&1)
    n=$(printf '%s\n' "$routes" | grep -c "over $1 ")
    [ "$n" -eq 8 ] && return 0
    printf '%s\n' "$routes" | head -30
    echo "FAIL: $n routes over $1, want 8"
    exit 1
}

net_one() {
    net=$1 coll=$2 algo=$3
    shift 3
    out=$(MESH_TUNE="$coll:$algo" "$run" $net_args "$prog" -o "$coll" -a "$algo" "$@" 2>&1)
    rc=$?
    used=$(printf '%s\n' "$out" | awk '$1 == "USED" { print $2 }')
    printf '%s %-15s %-18s %-14s rc=%d used=%s\n' "$net" "$coll" "$algo" "$*" "$rc" "${used:-?}"
    if [ $rc -ne 0 ] || [ "${used:-0}" -eq 0 ]; then
        printf '%s\n' "$out" | head -30
        status=1
    fi
}

net_each() {
    each_net=$1
    shift
    "$prog" --list >/dev/null || exit 1
    for pair in $("$prog" --list | awk '{ print $1 ":" $2 }'); do
        coll=${pair%%:*} algo=${pair#*:}
        if [ $# -gt 0 ]; then
            net_one "$each_net" "$coll" "$algo" "$@"
            continue
        fi
        case $coll in
        allreduce | reduce | reduce_scatter) net_one "$each_net" "$coll" "$algo" -d int32,fp16 ;;
        *) net_one "$each_net" "$coll" "$algo" ;;
        esac
    done
}
