#!/bin/sh
exec "${top_srcdir:-.}/tests/mp/conformance.sh" reduce_scatter
