#!/bin/sh
# A rank killed with SIGKILL mid-collective: every survivor reports it, over shm and over tcp.
# Then a rank stopped with SIGSTOP while survivors wait 2, 4, 6, ... s: every survivor names the
# stopped rank, not the survivor that timed out first.
set -e
b=${top_builddir:-.}
export MESH_TIMEOUT=10
"$b/tests/mp/fault" 3
"$b/tests/mp/fault" 4 self,tcp
MESH_TIMEOUT=2 "$b/tests/mp/fault" 3 "" stop
MESH_TIMEOUT=2 "$b/tests/mp/fault" 4 self,tcp stop
