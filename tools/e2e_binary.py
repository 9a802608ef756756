"""Prints the path of the end-to-end suite's test binary from cargo's JSON messages on stdin.

make test builds the suite with `cargo build ... --message-format=json-render-diagnostics` and
runs the binary itself, beside the rest of the build (see the Makefile's suite-build)."""

import json
import sys

found = [
    message["executable"]
    for message in map(json.loads, sys.stdin)
    if message.get("reason") == "compiler-artifact"
    and message["target"]["name"] == "e2e"
    and "test" in message["target"]["kind"]
    and message.get("executable")
]
if len(found) != 1:
    sys.exit(f"error: cargo built {len(found)} e2e test binaries, not one: {found}")
print(found[0])
