#!/bin/sh
# nccl/ is a client of the public API: besides system headers it includes mesh.h and its own
# headers only, never a header of libmesh/, transports/ or collectives/.
s=${top_srcdir:-.}
bad=$(grep -n -E '^[[:space:]]*#[[:space:]]*include' "$s"/nccl/*.c "$s"/nccl/*.h |
      grep -v -E '#[[:space:]]*include[[:space:]]*("nccl/[a-z_]+\.h"|<[a-z0-9_]+\.h>|<(sys|netinet|arpa)/[a-z0-9_]+\.h>)')
if [ -n "$bad" ]; then
    echo "nccl/ includes headers beyond mesh.h and its own:"
    echo "$bad"
    exit 1
fi
echo "nccl/: includes mesh.h, its own headers and system headers only"
