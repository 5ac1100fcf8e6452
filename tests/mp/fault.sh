#!/bin/sh
# A rank killed with SIGKILL mid-collective: every survivor reports it, over shm and over tcp.
set -e
b=${top_builddir:-.}
export MESH_TIMEOUT=10
"$b/tests/mp/fault" 3
"$b/tests/mp/fault" 4 self,tcp
