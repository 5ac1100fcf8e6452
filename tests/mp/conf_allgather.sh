#!/bin/sh
exec "${top_srcdir:-.}/tests/mp/conformance.sh" allgather
