#!/bin/sh
# The documentation's commands run: the README's C example compiles and runs on 2 ranks with the
# output it shows, the README's commands run (the quick-start bench's at reduced sizes), and every
# tool and option the guides name exists (tests/docs/readme.py says how). Skips without python3.
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipped"; exit 77; }
exec python3 "${top_srcdir:-.}/tests/docs/readme.py"
