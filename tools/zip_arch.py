"""Print the Lambda architecture (arm64 or x86_64) of the `bootstrap` binary inside a zip.

`make deploy-base` passes what the artefact holds as the stack's Architecture, instead of
trusting ARCH: a zip built for one architecture deployed as the other deploys cleanly and then
fails every invocation. The binary's ELF header says which machine it is for (e_machine at
offset 18: 183 aarch64, 62 x86-64).
"""

import struct
import sys
import zipfile

MACHINES = {183: "arm64", 62: "x86_64"}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: zip_arch.py <bootstrap.zip>", file=sys.stderr)
        return 2
    path = sys.argv[1]
    try:
        with zipfile.ZipFile(path) as z:
            header = z.open("bootstrap").read(20)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        print(f"error: {path} is not a zip with a bootstrap binary ({e}); run make package", file=sys.stderr)
        return 1
    if header[:4] != b"\x7fELF" or len(header) < 20:
        print(f"error: bootstrap in {path} is not an ELF binary", file=sys.stderr)
        return 1
    order = "<" if header[5] == 1 else ">"
    (machine,) = struct.unpack(order + "H", header[18:20])
    arch = MACHINES.get(machine)
    if arch is None:
        print(f"error: bootstrap in {path} is for ELF machine {machine}, which Lambda does not run", file=sys.stderr)
        return 1
    print(arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
