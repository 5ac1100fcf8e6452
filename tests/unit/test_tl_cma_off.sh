#!/bin/sh
# shm with cross-memory attach switched off: large messages stream through the rings.
MESH_SHM_CMA=0 exec "${top_builddir:-.}/tests/unit/test_tl" shm
