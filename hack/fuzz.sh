#!/usr/bin/env bash
# Runs every Fuzz target in the module for FUZZTIME (default 10s) each.
# go test accepts one -fuzz target per package run, so targets run one by
# one. New inputs that fail are written to the package's testdata/fuzz/.
set -euo pipefail
FUZZTIME=${FUZZTIME:-10s}
GO=${GO:-go}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file _ line; do
	name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
	pkg=./$(dirname "$file")
	echo "== $pkg $name ($FUZZTIME)"
	if ! $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
		status=1
	fi
done < <(git grep -n -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' -- '*_test.go')
exit $status
