# Shared by the GPU bench scripts (bench_gpu.sh, bench_nodes.sh), sourced with b set to the build
# tree: need_device MEM exits 77, saying why, unless mesh-info names MEM's device table active
# (cuda: a GPU and its driver; emu: MESH_DEVICE_EMU=1, which it sets), and sets MESH_TIMEOUT's
# default for the runs.
need_device() {
    [ "$1" = emu ] && export MESH_DEVICE_EMU=1
    export MESH_TIMEOUT=${MESH_TIMEOUT:-60}
    dev=$("$b/tools/mesh-info" | grep '^  device     :')
    case $dev in
    *": $1 active"*) ;;
    *)
        echo "no $1 device table here (mesh-info:${dev#*:}): skipped"
        exit 77
        ;;
    esac
}
