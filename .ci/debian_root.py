"""A Debian root that runs aarch64 Python under qemu, fetched without root
or apt: .ci/aarch64 tests the aarch64 wheel in it.

    python3 .ci/debian_root.py DIR    # DIR/root (arm64), DIR/qemu/usr/bin/qemu-aarch64-static

From Debian's archive (bookworm, whose Python is 3.11, the oldest the
package supports): the signed InRelease file, checked with gpgv against this
machine's Debian archive keyring; the Packages indexes it lists, checked by
their SHA-256; then the packages, each checked by the SHA-256 its index
gives, and unpacked with dpkg-deb. For arm64: Python 3.11 and the libraries
it and the binary wheels it imports (jaxlib, numpy, scipy) link, with their
dependencies as the index names them; for amd64: qemu-user-static alone. The
.deb files are kept in DIR/debs and reused while their checksums match.
"""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
# What to fetch, by architecture: the packages, whether their dependencies
# come too, and the folder under DIR they are unpacked into.
WANTED = {
    "arm64": (["python3.11-minimal", "libpython3.11-stdlib", "libstdc++6"], True, "root"),
    "amd64": (["qemu-user-static"], False, "qemu"),
}


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def checked(data: bytes, sha256: str, what: str) -> bytes:
    if hashlib.sha256(data).hexdigest() != sha256:
        sys.exit(f"debian_root: {what}: SHA-256 does not match its signed index")
    return data


def release_hashes() -> dict[str, str]:
    """SHA-256 by path, from the suite's InRelease file, once gpgv has
    checked its signature."""
    signed = download(f"{MIRROR}/dists/{SUITE}/InRelease")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "InRelease"
        path.write_bytes(signed)
        text = subprocess.run(["gpgv", "--quiet", "--keyring", str(KEYRING), "--output", "-",
                               str(path)], check=True, capture_output=True).stdout.decode()
    hashes, in_sha256 = {}, False
    for line in text.splitlines():
        if not line.startswith(" "):
            in_sha256 = line.startswith("SHA256:")
        elif in_sha256:
            sha, _size, name = line.split()
            hashes[name] = sha
    return hashes


def packages(arch: str, hashes: dict[str, str]) -> dict[str, dict[str, str]]:
    """The main component's index for `arch`: each package's fields."""
    name = f"main/binary-{arch}/Packages.xz"
    data = checked(download(f"{MIRROR}/dists/{SUITE}/{name}"), hashes[name], name)
    index = {}
    for stanza in lzma.decompress(data).decode().split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line.startswith(" ") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            index[fields["Package"]] = fields
    return index


def with_dependencies(wanted: list[str], index: dict[str, dict[str, str]]) -> list[str]:
    """`wanted` and every package they depend on (Depends, Pre-Depends), the
    first of each set of alternatives that the index holds."""
    seen: list[str] = []
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in index:
            sys.exit(f"debian_root: {name} is not in {SUITE}'s index")
        seen.append(name)
        fields = index[name]
        for relation in ("Pre-Depends", "Depends"):
            for clause in filter(None, fields.get(relation, "").split(",")):
                names = [alt.split()[0].split(":")[0] for alt in clause.split("|")]
                todo.append(next((n for n in names if n in index), names[0]))
    return sorted(seen)


def fetch_deb(fields: dict[str, str], debs: Path) -> Path:
    path = debs / Path(fields["Filename"]).name
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == fields["SHA256"]:
        return path
    data = checked(download(f"{MIRROR}/{fields['Filename']}"), fields["SHA256"],
                   fields["Package"])
    path.write_bytes(data)
    return path


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    debs = out / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    hashes = release_hashes()
    for arch, (wanted, dependencies, folder) in WANTED.items():
        index = packages(arch, hashes)
        names = with_dependencies(wanted, index) if dependencies else wanted
        into = out / folder
        shutil.rmtree(into, ignore_errors=True)
        into.mkdir()
        for name in names:
            subprocess.run(["dpkg-deb", "-x", str(fetch_deb(index[name], debs)), str(into)],
                           check=True)
        print(f"debian_root: {arch}: {len(names)} packages: {' '.join(names)}")


if __name__ == "__main__":
    main()
