#!/bin/sh
# shm with the smallest rings: every size wraps them many times, rendezvous headers and control
# packets among eager data (cross-memory attach on), and everything streamed (off).
t="${top_builddir:-.}/tests/unit/test_tl"
MESH_SHM_FIFO_SIZE=4096 "$t" shm || exit $?
MESH_SHM_FIFO_SIZE=4096 MESH_SHM_CMA=0 exec "$t" shm
