"""`make release`: the directory a platform team copies into one artifact bucket per region.

    <out>/<prefix>/<version>/bootstrap-<arch>.zip       the router for Lambda's <arch>
    <out>/<prefix>/<version>/bootstrap-<arch>.cdx.json  its CycloneDX SBOM (cargo-cyclonedx)
    <out>/<prefix>/<version>/routerctl-linux-<arch>     the operator CLI for Linux on <arch>
    <out>/<prefix>/<version>/routerctl-linux-<arch>.cdx.json  its SBOM
    <out>/<prefix>/<version>/routerctl-darwin-<arch>    the operator CLI for macOS on <arch>, and
    <out>/<prefix>/<version>/routerctl-darwin-<arch>.cdx.json  its SBOM: built on a Mac
                                                     (`build-darwin`), then put in (`add`)
    <out>/<prefix>/<version>/{base,tenant,spoke,fis,deployer}.yaml
    <out>/<prefix>/<version>/CHANGELOG.md, CHECKS      what changed; what was checked, and what not
    <out>/<prefix>/<version>/SHA256SUMS                 every file above (`sha256sum -c` reads it)
    <out>/<prefix>/latest/{base,tenant,spoke,fis,deployer}.yaml, VERSION, SHA256SUMS

routerctl for macOS cannot be linked here (it needs Apple's linker and SDK): the release
workflow's macOS jobs run `build-darwin` on a Mac of each architecture (the binary, its SBOM, a
CHECKS line and the SHA256SUMS of what they hand over), and its release job runs `add`, which puts
them into the directory `build` wrote, executable, in its CHECKS and SHA256SUMS, and verifies it.

`assets` makes what the GitHub release publishes from such a directory: its archive
(interruption-router-<version>.tar.gz), every file of <version>/ beside it, and a SHA256SUMS of
its own that lists them all, the archive included (the workflow attests each of them).

base.yaml's function takes its code from <prefix>/<version>/bootstrap-<Architecture>.zip when
CodeS3Key is empty (its Release mapping's CodePrefix, written here), so `latest/base.yaml` is the
same file as `<version>/base.yaml` and always names versioned code. Its `Architecture` default is
written too: arm64 when the release holds arm64's zip, else x86_64, so the template deployed with
nothing but CodeS3Bucket runs a zip the release holds (`verify` refuses one that does not).

Reproducible: the zips hold one file with fixed metadata (the commit's time, mode 0755), the
binary is built with the checkout's and cargo's paths remapped, and the SBOM's absolute paths and
time are the same for every run of one commit. `build` ends with `verify`, which the tests run
on a release made from a stand-in binary (`--binary`).

What goes in is checked first (`--cargo-deny`): licences, duplicate versions, sources and
advisories of the router, routerctl and every crate they link. Where the RustSec advisory database
cannot be fetched or read, `--advisories required` (the release workflow's) stops the release and
`--advisories best-effort` (make release's default) goes on, saying ADVISORIES NOT CHECKED in its
output and in CHECKS.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from zip_arch import MACHINES  # noqa: E402

TEMPLATES = ["base.yaml", "tenant.yaml", "spoke.yaml", "fis.yaml", "deployer.yaml"]
TRIPLES = {"x86_64": "x86_64-unknown-linux-gnu", "arm64": "aarch64-unknown-linux-gnu"}
# routerctl for macOS, named routerctl-darwin-<arch>: `uname -s` says Darwin, as Rust's and
# Apple's own target names do, so an install line reads the asset's name off the machine.
DARWIN_TRIPLES = {"x86_64": "x86_64-apple-darwin", "arm64": "aarch64-apple-darwin"}
# <mach-o/loader.h>, <mach/machine.h>: a 64-bit Mach-O's magic, an executable's file type, and
# the CPU types of the two Macs (CPU_ARCH_ABI64 | CPU_TYPE_X86, | CPU_TYPE_ARM).
MH_MAGIC_64, MH_EXECUTE = 0xFEEDFACF, 2
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}
DEFAULT_PREFIX = "interruption-router"
PACKAGE = "interruption-router"


class ReleaseError(Exception):
    """What is wrong and how to fix it; the release stops."""


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, text=True, **kwargs)


def say(line: str) -> None:
    print(f"release: {line}", flush=True)


# ------------------------------------------------------------------ what the checkout says


def workspace_version() -> str:
    out = run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
              cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        raise ReleaseError(f"cargo metadata failed: {out.stderr.strip()}")
    for package in json.loads(out.stdout)["packages"]:
        if package["name"] == PACKAGE:
            return package["version"]
    raise ReleaseError(f"no package {PACKAGE} in the workspace")


def release_mapping(text: str, entry: str) -> dict[str, str]:
    """The `Release: <entry>:` mapping of a template, read as text (the templates' short-form
    tags are not plain YAML)."""
    block = re.search(rf"^  Release:\n    {entry}:\n((?:      \S.*\n)+)", text, re.M)
    if not block:
        raise ReleaseError(f"no Mappings.Release.{entry} in the template")
    values = {}
    for line in block.group(1).splitlines():
        key, _, value = line.strip().partition(":")
        values[key] = value.strip().strip('"')
    return values


def check_versions(version: str) -> None:
    """Cargo.toml, the templates and the CHANGELOG must name one release."""
    for name, entry in [("base.yaml", "Router"), ("spoke.yaml", "Spoke")]:
        found = release_mapping((ROOT / "cloudformation" / name).read_text(), entry).get("Version")
        if found != version:
            raise ReleaseError(
                f"cloudformation/{name} says Release.{entry}.Version {found!r}, Cargo.toml says "
                f"{version}: set the mapping to \"{version}\" (or the workspace version to {found})")
    prefix = release_mapping((ROOT / "cloudformation/base.yaml").read_text(), "Router").get("CodePrefix")
    if prefix != f"{DEFAULT_PREFIX}/{version}":
        raise ReleaseError(
            f"cloudformation/base.yaml says Release.Router.CodePrefix {prefix!r}: set it to "
            f"{DEFAULT_PREFIX}/{version} (make release writes RELEASE_PREFIX in its copy)")
    if not changelog_section(version):
        raise ReleaseError(
            f"CHANGELOG.md has no section \"## {version}\": say what changed and what an operator "
            "must do to upgrade")


def changelog_section(version: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text() if (ROOT / "CHANGELOG.md").exists() else ""
    match = re.search(rf"^## {re.escape(version)}\b.*?(?=^## |\Z)", text, re.M | re.S)
    return match.group(0) if match else ""


def commit_time() -> int:
    """SOURCE_DATE_EPOCH if set, else the commit's time: what the zips and the SBOM say."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    out = run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True)
    if out.returncode != 0 or not out.stdout.strip():
        raise ReleaseError("git log failed: make release runs in a git checkout")
    return int(out.stdout.strip())


def installed_targets() -> set[str]:
    out = run(["rustup", "target", "list", "--installed"], capture_output=True)
    if out.returncode != 0:
        # Without rustup, the host's own target is the one there is.
        host = run(["rustc", "-vV"], capture_output=True).stdout
        return {line.split(": ")[1] for line in host.splitlines() if line.startswith("host: ")}
    return set(out.stdout.split())


# ------------------------------------------------------------------ what goes in is checked


# What the release ships: the router's zip and routerctl. cargo-deny checks the crates they link.
SHIPPED = (PACKAGE, "routerctl")
# --advisories: what a release does when the RustSec advisory database cannot be fetched or read.
ADVISORIES = ("best-effort", "required")


def deny_graph() -> tuple[list[str], list[str]]:
    """cargo-deny's arguments for one crate graph of everything shipped: the workspace's members
    as roots, but for those neither shipped nor linked by what is (the lab, the emulator, the
    tests, ...), excluded; and the workspace members the shipped crates link (their path
    dependencies, followed), for CHECKS to name."""
    out = run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
              cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        raise ReleaseError(f"cargo metadata failed: {out.stderr.strip()}")
    members = {p["name"]: p for p in json.loads(out.stdout)["packages"]}
    linked, pending = set(), list(SHIPPED)
    while pending:
        name = pending.pop()
        if name in linked:
            continue
        if name not in members:
            raise ReleaseError(f"no package {name} in the workspace")
        linked.add(name)
        # Normal and build dependencies ship (the latter run at build time); dev ones do not.
        pending += [d["name"] for d in members[name]["dependencies"]
                    if d.get("path") and d.get("kind") != "dev"]
    args = ["--manifest-path", str(ROOT / "Cargo.toml"), "--workspace"]
    for name in sorted(set(members) - linked):
        args += ["--exclude", name]
    return args, sorted(linked - set(SHIPPED))


# cargo-deny 0.20's errors when it cannot get at the database (src/advisories/helpers/db.rs):
# "failed to fetch advisory database <url> with cli" (no network, as here), "failed to load
# advisory database", "failed to acquire advisory database lock", "failed to create advisory
# database directory", "failed to load any advisories in the database".
DATABASE_UNREADABLE = re.compile(
    r"failed to (fetch|load|acquire|create) (any advisories in the database|advisory database)", re.I)
# What it says of what it found: a diagnostic, `error[vulnerability]`, `error[yanked]` and the like.
ADVISORY_FOUND = re.compile(r"^\s*error\[[\w-]+\]", re.M)


def database_unreadable(said: str) -> bool:
    """cargo-deny's advisory check failed because it could not fetch or read the database, not
    because it found an advisory (an advisory's own text may well mention a database)."""
    return bool(DATABASE_UNREADABLE.search(said)) and not ADVISORY_FOUND.search(said)


def deny(cargo_deny: str, advisories: str = "best-effort") -> list[str]:
    """Licences, duplicate versions and sources of what the release ships (the router and
    routerctl, and every crate they link; deny.toml says what is allowed and why); then the
    advisories, which need the RustSec database: where it cannot be fetched or read, `required`
    stops the release, `best-effort` goes on and says so."""
    # cargo-deny reads `cargo metadata` offline, which needs every platform's crates in cargo's
    # cache (windows-sys among them), not only those this machine builds: fetch them first.
    fetched = run(["cargo", "fetch", "--locked"], cwd=ROOT)
    if fetched.returncode != 0:
        raise ReleaseError("cargo fetch --locked failed (above): cargo-deny needs every crate of "
                           "Cargo.lock in cargo's cache")
    graph, linked = deny_graph()
    over = (f"{', '.join(SHIPPED)} and every crate they link (of the workspace: "
            f"{', '.join(linked)})")
    say(f"cargo-deny over {over}")
    common = [cargo_deny] + graph + ["--locked", "--exclude-dev", "--config", str(ROOT / "deny.toml")]
    checked = run(common + ["--offline", "check", "licenses", "bans", "sources"], cwd=ROOT)
    if checked.returncode != 0:
        raise ReleaseError("cargo-deny refused the dependencies (above): fix them, or change "
                           "deny.toml with the reason")
    version = run([cargo_deny, "--version"], capture_output=True).stdout.strip()
    lines = [f"licences, duplicate versions, sources: passed ({version}, deny.toml, over {over})"]
    found = run(common + ["check", "advisories"], cwd=ROOT, capture_output=True)
    if found.returncode == 0:
        lines.append(f"advisories: passed ({version}, the RustSec advisory database)")
        return lines
    said = (found.stderr + found.stdout).strip().splitlines()
    if not database_unreadable("\n".join(said)):
        print("\n".join(said), file=sys.stderr)
        raise ReleaseError("cargo-deny found advisories against the dependencies (above)")
    if advisories == "required":
        print("\n".join(said), file=sys.stderr)
        raise ReleaseError(
            "ADVISORIES NOT CHECKED: cargo-deny could not fetch or read the RustSec advisory "
            "database (above), and this release requires them (--advisories required, as "
            "make release ADVISORIES=required and the release workflow run it): nothing was "
            "built; run it again where the database can be fetched")
    say("ADVISORIES NOT CHECKED: cargo-deny could not fetch or read the RustSec advisory "
        "database from this machine:")
    for line in said[-3:]:
        print(f"    {line}", flush=True)
    say("going on without them (--advisories best-effort, make release's default; the release "
        "workflow runs ADVISORIES=required, which stops here): run `cargo deny check advisories` "
        "where the database can be fetched before publishing this release")
    lines.append("advisories: NOT CHECKED (the RustSec advisory database could not be fetched "
                 "or read where this release was built; --advisories best-effort went on "
                 "without them)")
    return lines


# ------------------------------------------------------------------ building


def build_binary(arch: str, cargo_lambda: str, package: str = PACKAGE) -> Path:
    """A release build of `package` for `arch` with cargo-lambda (zig links against an old
    glibc: Lambda's for the router, and most Linux distributions' for routerctl), the checkout's
    and cargo's own paths remapped so the binary does not depend on where they are."""
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    flags = [f"--remap-path-prefix={ROOT}=/build", f"--remap-path-prefix={cargo_home}=/cargo"]
    env = dict(os.environ, CARGO_ENCODED_RUSTFLAGS="\x1f".join(flags))
    env.pop("RUSTFLAGS", None)
    lambda_dir = ROOT / "target" / f"lambda-{arch}"
    say(f"{arch}: cargo lambda build --release --target {TRIPLES[arch]} --package {package} "
        "(tens of minutes on 2 cores)")
    # --disable-optimizations: the workspace's release profile as it is (cargo-lambda would
    # otherwise put its own defaults in, panic=abort among them, where the router wants unwind).
    out = run([cargo_lambda, "lambda", "build", "--release", "--disable-optimizations",
               "--target", TRIPLES[arch], "--package", package, "--lambda-dir", str(lambda_dir)],
              cwd=ROOT, env=env)
    if out.returncode != 0:
        raise ReleaseError(f"{arch}: the build of {package} failed (above)")
    binary = lambda_dir / package / "bootstrap"
    needed = glibc_needed(binary)
    if package == PACKAGE and needed > LAMBDA_GLIBC:
        raise ReleaseError(f"{arch}: the binary needs glibc 2.{needed[1]}, and Lambda's "
                           f"provided.al2023 has 2.{LAMBDA_GLIBC[1]}")
    say(f"{arch}: {package} needs glibc 2.{needed[1]} at most")
    return binary


# provided.al2023's glibc: a binary that needs a newer symbol version fails to start there.
LAMBDA_GLIBC = (2, 34)


def glibc_needed(binary: Path) -> tuple[int, int]:
    """The newest GLIBC_2.x symbol version the binary asks for (its .dynstr names them)."""
    found = [(2, int(m)) for m in re.findall(rb"GLIBC_2\.(\d+)", binary.read_bytes())]
    return max(found, default=(2, 0))


def elf_arch(path: Path) -> str | None:
    header = path.read_bytes()[:20] if path.stat().st_size >= 20 else b""
    if header[:4] != b"\x7fELF":
        return None
    order = "little" if header[5] == 1 else "big"
    return MACHINES.get(int.from_bytes(header[18:20], order))


def macho_cpu(path: Path) -> int | None:
    """The CPU type of a 64-bit Mach-O executable (a Mac's `mach_header_64`, little-endian on
    both Macs), or None for anything else: a universal binary, a library, an ELF, ..."""
    with open(path, "rb") as f:
        header = f.read(16)
    if len(header) < 16:
        return None
    magic, cpu, _, filetype = (int.from_bytes(header[i:i + 4], "little") for i in (0, 4, 8, 12))
    return cpu if (magic, filetype) == (MH_MAGIC_64, MH_EXECUTE) else None


def macho_arch(path: Path) -> str | None:
    cpu = macho_cpu(path)
    return None if cpu is None else MACHO_CPUS.get(cpu)


def macho_kind(path: Path) -> str:
    """What a file is, as a Mac would load it: `an arm64 Mach-O executable`, ..."""
    cpu = macho_cpu(path)
    if cpu is None:
        return "not a 64-bit Mach-O executable"
    return f"an {MACHO_CPUS.get(cpu, f'unknown CPU type {cpu:#x}')} Mach-O executable"


def write_zip(binary: Path, zip_path: Path, when: int) -> None:
    """One file, `bootstrap`, with fixed metadata: the same binary gives the same bytes."""
    import time
    stamp = time.gmtime(max(when, 315532800))[:6]  # zip cannot say anything before 1980
    info = zipfile.ZipInfo("bootstrap", date_time=stamp)
    info.create_system = 3  # unix, so the mode below is read
    info.external_attr = (0o100755 & 0xFFFF) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(zip_path, "w") as z:
        z.writestr(info, binary.read_bytes(), compresslevel=6)


def member_sbom_files() -> list[Path]:
    """Where cargo-cyclonedx writes an SBOM for each binary of the workspace: `<name>_bin.cdx.json`
    beside its package's Cargo.toml (the lab's and the simulation's among them)."""
    out = run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
              cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        raise ReleaseError(f"cargo metadata failed: {out.stderr.strip()}")
    return [Path(p["manifest_path"]).parent / f"{t['name']}_bin.cdx.json"
            for p in json.loads(out.stdout)["packages"] for t in p["targets"]
            if "bin" in t["kind"]]


def sbom(triple: str, cyclonedx: str, out: Path, when: int, artifact: str,
         package: str = PACKAGE) -> None:
    """cargo-cyclonedx's SBOM of `package`'s binary dependencies for `triple` (build scripts'
    dependencies, which do not ship, left out), with the checkout's path made relative so the
    document does not depend on where the checkout is."""
    member_files = member_sbom_files()
    existed = {p for p in member_files if p.exists()}
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(when))
    manifest_dir = {PACKAGE: "router", "routerctl": "routerctl"}[package]
    done = run([cyclonedx, "cyclonedx", "--manifest-path", str(ROOT / manifest_dir / "Cargo.toml"),
                "--format", "json", "--spec-version", "1.5", "--describe", "binaries",
                "--target", triple, "--no-build-deps"], cwd=ROOT, env=env,
               capture_output=True)
    produced = ROOT / manifest_dir / f"{package}_bin.cdx.json"
    try:
        if done.returncode != 0 or not produced.exists():
            raise ReleaseError(f"{triple}: cargo-cyclonedx failed: {done.stderr.strip()}")
        text = produced.read_text().replace(f"file://{ROOT}", "file://.")
    finally:
        # cargo-cyclonedx writes one file per workspace binary next to its Cargo.toml.
        for p in member_files:
            if p not in existed and p.exists():
                p.unlink()
    doc = json.loads(text)
    doc["metadata"].setdefault("properties", []).append(
        {"name": "interruption-router:artifact", "value": artifact})
    out.write_text(json.dumps(doc, indent=2) + "\n")


def write_executable(binary: Path, path: Path, when: int) -> None:
    """A copy of `binary`, mode 0755, its time the commit's (reproducible bytes and metadata)."""
    shutil.copyfile(binary, path)
    path.chmod(0o755)
    os.utime(path, (when, when))


ARCHITECTURE_DEFAULT = re.compile(r"(^  Architecture:\n    Type: String\n    Default: )(\S+)\n", re.M)


def default_architecture(base: str) -> str | None:
    """The `Default` of base.yaml's Architecture parameter."""
    found = ARCHITECTURE_DEFAULT.search(base)
    return found.group(2) if found else None


def set_default_architecture(base: str, arch: str) -> str:
    if default_architecture(base) is None:
        raise ReleaseError("cloudformation/base.yaml: no Architecture parameter with a Default "
                           "(its Type then Default lines) for make release to set")
    return ARCHITECTURE_DEFAULT.sub(lambda m: f"{m.group(1)}{arch}\n", base, count=1)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_sums(directory: Path) -> None:
    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != "SHA256SUMS")
    (directory / "SHA256SUMS").write_text("".join(f"{sha256(directory / n)}  {n}\n" for n in names))


def build(args: argparse.Namespace) -> int:
    version = workspace_version()
    check_versions(version)
    when = commit_time()
    prefix = args.prefix.strip("/")
    if not re.fullmatch(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*", prefix):
        raise ReleaseError(f"RELEASE_PREFIX={args.prefix!r}: give an S3 key prefix of letters, "
                           "digits, '.', '_', '-' and '/' (e.g. interruption-router)")
    given = dict(b.split("=", 1) for b in args.binary)
    given_cli = dict(b.split("=", 1) for b in args.routerctl)
    wanted = args.arch or list(TRIPLES)
    for arch in list(given) + list(given_cli) + wanted:
        if arch not in TRIPLES:
            raise ReleaseError(f"architecture {arch!r}: Lambda runs x86_64 or arm64")

    checks = [f"interruption-router {version}, commit time {when}"]
    if args.cargo_deny:
        checks += deny(args.cargo_deny, args.advisories)
    elif args.advisories == "required":
        raise ReleaseError("--advisories required: the advisory check needs --cargo-deny "
                           "(make release gives it)")
    else:
        checks.append("licences, duplicate versions, sources, advisories: NOT CHECKED "
                      "(a development build: --cargo-deny not given)")

    out = Path(args.out).resolve()
    version_dir, latest = out / prefix / version, out / prefix / "latest"
    for d in (version_dir, latest):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)

    targets = installed_targets()
    built = []
    for arch, triple in TRIPLES.items():
        if arch not in wanted:
            checks.append(f"{arch}: not built (not asked for)")
            continue
        if arch in given:
            binary = Path(given[arch])
            checks.append(f"{arch}: the binary given ({binary.name}), not built here")
        elif triple in targets:
            if not args.cargo_lambda:
                raise ReleaseError(f"{arch}: --cargo-lambda is needed to build (make release gives it)")
            binary = build_binary(arch, args.cargo_lambda)
            checks.append(f"{arch}: built (cargo lambda build --release --target {triple})")
        else:
            say(f"{arch}: NOT BUILT: the Rust target {triple} is not installed here "
                f"(rustup target add {triple}, then make release again)")
            checks.append(f"{arch}: not built (the Rust target {triple} is not installed)")
            continue
        found = elf_arch(binary)
        if found != arch:
            raise ReleaseError(f"{binary} is a {found or 'non-ELF'} binary, not {arch}")
        zip_name = f"bootstrap-{arch}.zip"
        write_zip(binary, version_dir / zip_name, when)
        if args.cyclonedx:
            sbom(triple, args.cyclonedx, version_dir / f"bootstrap-{arch}.cdx.json", when,
                 zip_name)
        built.append(arch)
        say(f"{arch}: {prefix}/{version}/{zip_name}")
        # routerctl for an operator's Linux machine of the same architecture.
        if arch in given_cli:
            cli = Path(given_cli[arch])
            checks.append(f"{arch}: routerctl given ({cli.name}), not built here")
        elif arch in given:
            checks.append(f"{arch}: routerctl not shipped (a development build: no --routerctl)")
            continue
        else:
            cli = build_binary(arch, args.cargo_lambda, "routerctl")
            checks.append(f"{arch}: routerctl built (cargo lambda build --release --target "
                          f"{triple} --package routerctl; glibc 2.{glibc_needed(cli)[1]} or later)")
        if elf_arch(cli) != arch:
            raise ReleaseError(f"{cli} is a {elf_arch(cli) or 'non-ELF'} binary, not {arch}")
        cli_name = f"routerctl-linux-{arch}"
        write_executable(cli, version_dir / cli_name, when)
        if args.cyclonedx:
            sbom(triple, args.cyclonedx, version_dir / f"{cli_name}.cdx.json", when, cli_name,
                 "routerctl")
        say(f"{arch}: {prefix}/{version}/{cli_name}")
    if not built:
        raise ReleaseError("no architecture could be built: install a Rust target "
                           f"({', '.join(TRIPLES.values())})")
    if not args.cyclonedx:
        checks.append("SBOM: NOT MADE (a development build: --cyclonedx not given)")
    for arch in DARWIN_TRIPLES:
        checks.append(f"{darwin_name(arch)}: {NOT_BUILT_HERE}")

    # The template's own default architecture must name a zip the release holds.
    default_arch = "arm64" if "arm64" in built else "x86_64"
    for name in TEMPLATES:
        text = (ROOT / "cloudformation" / name).read_text()
        if name == "base.yaml":
            text = text.replace(f"      CodePrefix: {DEFAULT_PREFIX}/{version}\n",
                                f"      CodePrefix: {prefix}/{version}\n", 1)
            text = set_default_architecture(text, default_arch)
            if default_arch != "arm64":
                checks.append(f"base.yaml: Architecture defaults to {default_arch} (the release "
                              "holds no arm64 zip)")
        (version_dir / name).write_text(text)
        (latest / name).write_text(text)
    shutil.copyfile(ROOT / "CHANGELOG.md", version_dir / "CHANGELOG.md")
    (version_dir / "CHECKS").write_text("".join(f"{c}\n" for c in checks))
    (latest / "VERSION").write_text(f"{version}\n")
    write_sums(version_dir)
    write_sums(latest)

    problems = verify(out, prefix, version, sbom_required=bool(args.cyclonedx))
    if problems:
        raise ReleaseError("the release does not verify:\n  " + "\n  ".join(problems))
    say(f"{out}/{prefix}: {version} ({', '.join(built)}) and latest/; "
        f"upload with: aws s3 sync {out}/ s3://<bucket of each region>/")
    return 0


# ------------------------------------------------------------------ routerctl for macOS


def darwin_name(arch: str) -> str:
    return f"routerctl-darwin-{arch}"


# make release's CHECKS line for each Mac until `add` replaces it with the line of the job that
# built its binary.
NOT_BUILT_HERE = ("not built here (routerctl for macOS is built on a Mac: the release workflow's "
                  "macOS jobs, then tools/release.py add)")


def build_darwin_binary(arch: str) -> Path:
    """A release build of routerctl for macOS on `arch`, with cargo on this Mac (Apple's linker
    and SDK: nothing else links a Mach-O), the checkout's and cargo's paths remapped as `build`
    does, in the workspace's release profile."""
    if sys.platform != "darwin":
        raise ReleaseError(f"{darwin_name(arch)}: routerctl for macOS is linked on a Mac (the "
                           "release workflow's macOS jobs); give a binary with --routerctl here")
    triple = DARWIN_TRIPLES[arch]
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    flags = [f"--remap-path-prefix={ROOT}=/build", f"--remap-path-prefix={cargo_home}=/cargo"]
    env = dict(os.environ, CARGO_ENCODED_RUSTFLAGS="\x1f".join(flags))
    env.pop("RUSTFLAGS", None)
    say(f"{darwin_name(arch)}: cargo build --release --locked --target {triple} "
        "--package routerctl")
    out = run(["cargo", "build", "--release", "--locked", "--target", triple,
               "--package", "routerctl"], cwd=ROOT, env=env)
    if out.returncode != 0:
        raise ReleaseError(f"{darwin_name(arch)}: the build of routerctl failed (above)")
    return ROOT / "target" / triple / "release" / "routerctl"


def host_arch() -> str:
    import platform
    return {"aarch64": "arm64"}.get(platform.machine(), platform.machine())


def build_darwin(args: argparse.Namespace) -> int:
    """What one macOS job hands the release job: `<to>/routerctl-darwin-<arch>` (mode 0755, the
    commit's time), its SBOM, CHECKS (how it was made, whether it ran) and SHA256SUMS of them."""
    version = workspace_version()
    when = commit_time()
    arch, name = args.arch, darwin_name(args.arch)
    to = Path(args.to).resolve()
    if args.routerctl:
        binary = Path(args.routerctl)
        checks = [f"{name}: the binary given ({binary.name}), not built here"]
    else:
        binary = build_darwin_binary(arch)
        checks = [f"{name}: built (cargo build --release --locked --target "
                  f"{DARWIN_TRIPLES[arch]} --package routerctl, on macOS "
                  f"{mac_version()} {host_arch()})"]
    kind = macho_kind(binary)
    if kind != f"an {arch} Mach-O executable":
        raise ReleaseError(f"{binary} is {kind}, not {arch}")
    if to.exists():
        shutil.rmtree(to)
    to.mkdir(parents=True)
    write_executable(binary, to / name, when)
    # Run where it was built: a Mac of its own CPU loads it (a code signature broken by strip,
    # a missing library or a wrong deployment target show here, not on an operator's laptop).
    if sys.platform == "darwin" and host_arch() == arch:
        ran = run([str(to / name), "--version"], capture_output=True)
        if ran.returncode != 0 or ran.stdout != f"routerctl {version}\n":
            raise ReleaseError(f"{name} --version said {ran.stdout!r} {ran.stderr.strip()!r} "
                               f"(exit {ran.returncode}), not routerctl {version}")
        checks.append(f"{name}: ran here (routerctl --version: routerctl {version})")
    else:
        checks.append(f"{name}: not run here (not a Mac of its CPU)")
    if args.cyclonedx:
        sbom(DARWIN_TRIPLES[arch], args.cyclonedx, to / f"{name}.cdx.json", when, name,
             "routerctl")
        problems = check_sbom(to / f"{name}.cdx.json", DARWIN_TRIPLES[arch], version, "routerctl")
        if problems:
            raise ReleaseError("the SBOM does not verify:\n  " + "\n  ".join(problems))
    else:
        checks.append(f"{name}: SBOM NOT MADE (a development build: --cyclonedx not given)")
    (to / "CHECKS").write_text("".join(f"{c}\n" for c in checks))
    write_sums(to)
    say(f"{to}: {', '.join(sorted(p.name for p in to.iterdir()))}")
    return 0


def mac_version() -> str:
    out = run(["sw_vers", "-productVersion"], capture_output=True)
    return out.stdout.strip() if out.returncode == 0 else "?"


def add(dist: Path, prefix: str, version: str, handed: list[Path],
        sbom_required: bool = True) -> None:
    """Put what macOS jobs handed over (each a `build-darwin` directory, as a workflow artifact
    gives it back: the same bytes, no file mode) into the release directory `build` wrote:
    each binary executable again and its SBOM beside it, each CHECKS line in place of make
    release's `not built here`, the version's SHA256SUMS written again; then `verify`. Each
    handover is checked first (its own SHA256SUMS, nothing but a macOS routerctl, its SBOM,
    CHECKS and SHA256SUMS), and nothing is added unless every one passes."""
    version_dir = dist / prefix / version
    if not (version_dir / "CHECKS").exists():
        raise ReleaseError(f"{version_dir}: not a release directory (make release writes one)")
    problems, taken = [], []
    for d in handed:
        problems += check_sums(d)
        names = {p.name for p in d.iterdir()} if d.is_dir() else set()
        archs = [a for a in DARWIN_TRIPLES if darwin_name(a) in names]
        if len(archs) != 1:
            problems.append(f"{d}: holds no routerctl-darwin-<arch> of {sorted(DARWIN_TRIPLES)}, "
                            "or more than one")
            continue
        arch = archs[0]
        name = darwin_name(arch)
        for stray in sorted(names - {name, f"{name}.cdx.json", "CHECKS", "SHA256SUMS"}):
            problems.append(f"{d / stray}: not something a macOS job hands over")
        if "CHECKS" not in names:
            problems.append(f"{d}: no CHECKS (build-darwin writes one)")
        taken.append((d, arch))
    if problems:
        raise ReleaseError("what the macOS jobs handed over does not verify; nothing was added:"
                           "\n  " + "\n  ".join(problems))
    when = commit_time()
    checks = (version_dir / "CHECKS").read_text().splitlines()
    for d, arch in taken:
        name = darwin_name(arch)
        write_executable(d / name, version_dir / name, when)
        if (d / f"{name}.cdx.json").exists():
            shutil.copyfile(d / f"{name}.cdx.json", version_dir / f"{name}.cdx.json")
            os.utime(version_dir / f"{name}.cdx.json", (when, when))
        handed_lines = (d / "CHECKS").read_text().splitlines()
        checks = [c for c in checks if not c.startswith(f"{name}: ")] + handed_lines
        say(f"{name}: {prefix}/{version}/{name}")
    (version_dir / "CHECKS").write_text("".join(f"{c}\n" for c in checks))
    write_sums(version_dir)
    problems = verify(dist, prefix, version, sbom_required)
    if problems:
        raise ReleaseError("the release does not verify:\n  " + "\n  ".join(problems))


# ------------------------------------------------------------------ the GitHub release's assets


def archive_name(version: str) -> str:
    return f"{PACKAGE}-{version}.tar.gz"


def write_archive(dist: Path, prefix: str, version: str, path: Path, when: int) -> None:
    """`<prefix>/<version>/` and `<prefix>/latest/` as one tar.gz, for `aws s3 sync` after
    extracting: sorted entries, every time the commit's, owner root, mode 0755 for executables
    and directories and 0644 for the rest, so one release directory gives the same bytes."""
    import gzip
    import tarfile
    parts = prefix.split("/")
    dirs = ["/".join(parts[:i + 1]) for i in range(len(parts))] + [f"{prefix}/{version}",
                                                                   f"{prefix}/latest"]

    def info(name: str, mode: int) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(name)
        entry.mode, entry.mtime, entry.uid, entry.gid, entry.uname, entry.gname = (
            mode, when, 0, 0, "root", "root")
        return entry

    with open(path, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=when) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            entry = info(d, 0o755)
            entry.type = tarfile.DIRTYPE
            tar.addfile(entry)
        for sub in (version, "latest"):
            for f in sorted((dist / prefix / sub).iterdir()):
                if not f.is_file():
                    raise ReleaseError(f"{f}: not a file (a release directory holds files only)")
                entry = info(f"{prefix}/{sub}/{f.name}",
                             0o755 if f.stat().st_mode & 0o111 else 0o644)
                entry.size = f.stat().st_size
                with open(f, "rb") as content:
                    tar.addfile(entry, content)


def assets(dist: Path, out: Path, prefix: str, version: str, sbom_required: bool = True) -> None:
    """What the GitHub release publishes, into `out` (emptied first): the release directory as
    one archive, every file of `<prefix>/<version>/` beside it, and a SHA256SUMS of its own
    listing all of them, the archive included: the version directory's SHA256SUMS lives inside
    the archive it would check. The workflow attests every file here, so a download is verified
    (`gh attestation verify`) before its sums are read (`sha256sum --check`)."""
    problems = verify(dist, prefix, version, sbom_required)
    if problems:
        raise ReleaseError(f"{dist} does not verify:\n  " + "\n  ".join(problems))
    version_dir = dist / prefix / version
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    when = commit_time()
    write_archive(dist, prefix, version, out / archive_name(version), when)
    for f in sorted(version_dir.iterdir()):
        if f.name != "SHA256SUMS":
            shutil.copy2(f, out / f.name)
    write_sums(out)
    problems = check_sums(out)
    if problems:
        raise ReleaseError("the assets do not verify:\n  " + "\n  ".join(problems))
    say(f"{out}: {archive_name(version)}, SHA256SUMS and {len(list(out.iterdir())) - 2} files "
        f"of {prefix}/{version}/")


# ------------------------------------------------------------------ verifying


@functools.lru_cache(maxsize=None)
def dependencies(triple: str, package: str = PACKAGE) -> frozenset[str]:
    """`name@version` of every crate `package`'s binary links for `triple`, as cargo resolves it
    (normal dependencies; build scripts' and dev-dependencies do not ship)."""
    out = run(["cargo", "tree", "--locked", "--package", package, "--edges", "normal",
               "--target", triple, "--prefix", "none", "--format", "{p}"],
              cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        raise ReleaseError(f"cargo tree failed: {out.stderr.strip()}")
    deps = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("v") and parts[0] != package:
            deps.add(f"{parts[0]}@{parts[1][1:]}")
    return frozenset(deps)


def check_sums(directory: Path) -> list[str]:
    sums = directory / "SHA256SUMS"
    if not sums.exists():
        return [f"{directory}: no SHA256SUMS"]
    problems, listed = [], set()
    for line in sums.read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed.add(name)
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: listed in SHA256SUMS, missing")
        elif sha256(path) != digest:
            problems.append(f"{path}: its SHA-256 is not the one SHA256SUMS lists")
    for p in directory.iterdir():
        if p.name != "SHA256SUMS" and p.name not in listed:
            problems.append(f"{p}: not in SHA256SUMS")
    return problems


def check_sbom(path: Path, triple: str, version: str, package: str = PACKAGE) -> list[str]:
    if not path.exists():
        return [f"{path}: missing (every artifact has its SBOM)"]
    doc = json.loads(path.read_text())
    problems = []
    component = doc.get("metadata", {}).get("component", {})
    if doc.get("bomFormat") != "CycloneDX":
        problems.append(f"{path}: not a CycloneDX document")
    if (component.get("name"), component.get("version")) != (package, version):
        problems.append(f"{path}: describes {component.get('name')} {component.get('version')}, "
                        f"not {package} {version}")
    triples = {p.get("value") for p in doc.get("metadata", {}).get("properties", [])
               if p.get("name") == "cdx:rustc:sbom:target:triple"}
    if triples != {triple}:
        problems.append(f"{path}: made for {sorted(triples)}, not {triple}")
    listed = {f"{c.get('name')}@{c.get('version')}" for c in doc.get("components", [])}
    missing = sorted(dependencies(triple, package) - listed)
    if missing:
        problems.append(f"{path}: lacks {len(missing)} of {package}'s dependencies: "
                        + ", ".join(missing[:10]) + (" …" if len(missing) > 10 else ""))
    return problems


def verify(out: Path, prefix: str, version: str, sbom_required: bool = True) -> list[str]:
    """Everything a bucket copy of this release must hold, checked from the files alone."""
    version_dir, latest = out / prefix / version, out / prefix / "latest"
    problems = check_sums(version_dir) + check_sums(latest)
    zips = sorted(version_dir.glob("bootstrap-*.zip"))
    if not zips:
        problems.append(f"{version_dir}: no bootstrap-<arch>.zip")
    for z in zips:
        arch = z.name[len("bootstrap-"):-len(".zip")]
        with zipfile.ZipFile(z) as archive:
            entries = archive.infolist()
            if [e.filename for e in entries] != ["bootstrap"]:
                problems.append(f"{z}: holds {[e.filename for e in entries]}, not just bootstrap")
                continue
            if (entries[0].external_attr >> 16) & 0o777 != 0o755:
                problems.append(f"{z}: bootstrap is not executable (mode 0755)")
            with tempfile.NamedTemporaryFile() as tmp:
                tmp.write(archive.read("bootstrap")[:20])
                tmp.flush()
                if elf_arch(Path(tmp.name)) != arch:
                    problems.append(f"{z}: bootstrap is not an {arch} binary")
        if sbom_required:
            problems += check_sbom(version_dir / f"bootstrap-{arch}.cdx.json", TRIPLES[arch],
                                   version)
    for system, triples, named in [("linux", TRIPLES, "Linux"),
                                   ("darwin", DARWIN_TRIPLES, "macOS")]:
        for cli in sorted(version_dir.glob(f"routerctl-{system}-*")):
            if cli.name.endswith(".cdx.json"):
                continue
            arch = cli.name[len(f"routerctl-{system}-"):]
            if arch not in triples:
                problems.append(f"{cli}: {arch} is not an architecture routerctl is released for "
                                f"on {named} ({', '.join(sorted(triples))})")
                continue
            if system == "linux" and elf_arch(cli) != arch:
                problems.append(f"{cli}: not an {arch} binary")
            if system == "darwin" and macho_arch(cli) != arch:
                problems.append(f"{cli}: not an {arch} Mach-O executable ({macho_kind(cli)})")
            if cli.stat().st_mode & 0o111 == 0:
                problems.append(f"{cli}: not executable")
            if sbom_required:
                problems += check_sbom(version_dir / f"{cli.name}.cdx.json", triples[arch],
                                       version, "routerctl")
    for name in TEMPLATES:
        if not (version_dir / name).exists():
            problems.append(f"{version_dir / name}: missing")
        elif (latest / name).read_bytes() != (version_dir / name).read_bytes():
            problems.append(f"{latest / name}: not the same as {version}/{name}")
    base = (version_dir / "base.yaml").read_text() if (version_dir / "base.yaml").exists() else ""
    if base:
        mapping = release_mapping(base, "Router")
        if mapping.get("Version") != version or mapping.get("CodePrefix") != f"{prefix}/{version}":
            problems.append(f"{version_dir}/base.yaml: Release mapping {mapping}, not Version "
                            f"{version} with CodePrefix {prefix}/{version}")
        if '"${CodePrefix}/bootstrap-${Architecture}.zip"' not in base:
            problems.append(f"{version_dir}/base.yaml: its function does not take "
                            "${CodePrefix}/bootstrap-${Architecture}.zip")
        arch = default_architecture(base)
        if not (version_dir / f"bootstrap-{arch}.zip").exists():
            problems.append(f"{version_dir}/base.yaml: Architecture defaults to {arch}, but the "
                            f"release holds no bootstrap-{arch}.zip: deployed with its defaults, "
                            "the function would name code that is not there")
    if (latest / "VERSION").exists() and (latest / "VERSION").read_text() != f"{version}\n":
        problems.append(f"{latest}/VERSION: not {version}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the release directory, then verify it")
    b.add_argument("--out", required=True, help="the release directory (a bucket's root)")
    b.add_argument("--prefix", default=DEFAULT_PREFIX, help="the key prefix in the bucket")
    b.add_argument("--arch", action="append", choices=sorted(TRIPLES),
                   help="only these architectures (default: every one whose target is installed)")
    b.add_argument("--binary", action="append", default=[], metavar="ARCH=PATH",
                   help="take this router binary for ARCH instead of building it (tests)")
    b.add_argument("--routerctl", action="append", default=[], metavar="ARCH=PATH",
                   help="take this routerctl binary for ARCH instead of building it (tests)")
    b.add_argument("--cargo-lambda", help="cargo-lambda, to build each installed target")
    b.add_argument("--cyclonedx", help="cargo-cyclonedx, to make each zip's SBOM")
    b.add_argument("--cargo-deny", help="cargo-deny, to check what goes in (deny.toml)")
    b.add_argument("--advisories", choices=ADVISORIES, default="best-effort",
                   help="where the RustSec advisory database cannot be fetched or read: "
                        "required stops the release (the release workflow's), best-effort "
                        "(the default) goes on and says ADVISORIES NOT CHECKED in its output "
                        "and in CHECKS")
    a = sub.add_parser("assets", help="the GitHub release's assets of a release directory: "
                       "its archive, its version's files and a SHA256SUMS of all of them")
    a.add_argument("out", help="the release directory (make release's RELEASE_DIR)")
    a.add_argument("--to", required=True, help="the directory of the assets (emptied first)")
    a.add_argument("--prefix", default=DEFAULT_PREFIX)
    a.add_argument("--version", help="default: the workspace's")
    a.add_argument("--no-sbom", action="store_true", help="a development build made without SBOMs")
    d = sub.add_parser("build-darwin", help="on a Mac: routerctl for macOS on one architecture, "
                       "its SBOM, CHECKS line and sums, into a directory for `add`")
    d.add_argument("--arch", required=True, choices=sorted(DARWIN_TRIPLES))
    d.add_argument("--to", required=True, help="the directory to hand over (emptied first)")
    d.add_argument("--routerctl", metavar="PATH",
                   help="take this binary instead of building it (tests)")
    d.add_argument("--cyclonedx", help="cargo-cyclonedx, to make the binary's SBOM")
    ad = sub.add_parser("add", help="put what build-darwin made into a release directory "
                        "(CHECKS, SHA256SUMS), then verify it")
    ad.add_argument("out", help="the release directory (make release's RELEASE_DIR)")
    ad.add_argument("--from", dest="handed", action="append", required=True, metavar="DIR",
                    help="a directory build-darwin made (one per Mac)")
    ad.add_argument("--prefix", default=DEFAULT_PREFIX)
    ad.add_argument("--version", help="default: the workspace's")
    ad.add_argument("--no-sbom", action="store_true", help="a development build made without SBOMs")
    sub.add_parser("version", help="print the workspace's version")
    sub.add_parser("notes", help="print the CHANGELOG section of the workspace's version")
    v = sub.add_parser("verify", help="check a release directory")
    v.add_argument("out")
    v.add_argument("--prefix", default=DEFAULT_PREFIX)
    v.add_argument("--version", help="default: the workspace's")
    v.add_argument("--no-sbom", action="store_true", help="a development build made without SBOMs")
    args = parser.parse_args()
    try:
        if args.command == "build":
            return build(args)
        if args.command == "build-darwin":
            return build_darwin(args)
        if args.command == "version":
            print(workspace_version())
            return 0
        if args.command == "notes":
            version = workspace_version()
            section = changelog_section(version)
            if not section:
                raise ReleaseError(f"CHANGELOG.md has no section \"## {version}\"")
            print(section.strip())
            return 0
        version = args.version or workspace_version()
        if args.command == "add":
            add(Path(args.out).resolve(), args.prefix.strip("/"), version,
                [Path(h).resolve() for h in args.handed], sbom_required=not args.no_sbom)
            return 0
        if args.command == "assets":
            assets(Path(args.out).resolve(), Path(args.to).resolve(), args.prefix.strip("/"),
                   version, sbom_required=not args.no_sbom)
            return 0
        problems = verify(Path(args.out).resolve(), args.prefix.strip("/"), version,
                          sbom_required=not args.no_sbom)
        for p in problems:
            print(f"release: {p}", file=sys.stderr)
        if not problems:
            say(f"{args.out}: {version} verifies (checksums, zips, routerctl, SBOMs, templates, "
                "latest/)")
        return 1 if problems else 0
    except ReleaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
