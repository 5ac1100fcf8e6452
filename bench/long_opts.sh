# Sourced by the bench scripts whose options all take a value (soak.sh, train-bench.sh).
# long_opts NAME LAST STATUS "OPTION ..." "$@": each --OPTION VALUE sets the variable OPTION;
# -h/--help prints lines 2 to LAST of the script (its header, comment marks off) and exits 0;
# anything else fails with "NAME: unknown option ..." and exit status STATUS.
long_opts() {
    lo_name=$1 lo_last=$2 lo_status=$3 lo_opts=" $4 "
    shift 4
    while [ $# -gt 0 ]; do
        case $1 in
        -h | --help) sed -n "2,${lo_last}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --*)
            case $lo_opts in
            *" ${1#--} "*) eval "${1#--}=\$2"; shift 2; continue ;;
            esac ;;
        esac
        echo "$lo_name: unknown option $1" >&2
        exit "$lo_status"
    done
}
