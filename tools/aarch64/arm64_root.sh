#!/usr/bin/env bash
# An arm64 (aarch64) Debian 12 root with just what Python 3.11 and torch need,
# for running aarch64 code on an x86-64 machine under qemu-user: Debian's arm64
# packages of python3.11 and libpython3.11-dev with their dependencies,
# downloaded by apt-get with a private configuration (the system's apt state is
# not touched) and unpacked with dpkg-deb (no maintainer scripts, no chroot),
# plus the files qemu 7.2 gets wrong (an ARM /proc/cpuinfo and midr_el1, see
# tools/aarch64/env.sh). A full debootstrap took 13 min here; this takes ~1.
#
#   tools/aarch64/arm64_root.sh ROOT          ROOT/usr/bin/python3.11; reused when complete
#
# Needs apt-get, dpkg-deb, Debian's archive keyring and qemu-aarch64-static.
set -euo pipefail

root=${1:?usage: tools/aarch64/arm64_root.sh ROOT}
packages=(python3.11 libpython3.11-dev libstdc++6 libgomp1)
stamp=$root/.fusedops-arm64-root
want="bookworm arm64: ${packages[*]}"
if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "arm64_root: $root is ready ($want)" >&2
  exit 0
fi
rm -rf "$root"
mkdir -p "$root"
root=$(cd "$root" && pwd)
apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$apt_dir/sources.list" <<SOURCES
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
SOURCES
# shellcheck source=tools/private_apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../private_apt.sh"
private_apt "$apt_dir" arm64
export APT_CONFIG=$apt_dir/apt.conf
apt-get -qq update
# With an empty package status every dependency is downloaded: the closure.
apt-get -qq install --download-only -y "${packages[@]}" >/dev/null
count=0
for deb in "$apt_dir"/cache/archives/*.deb; do
  dpkg-deb -x "$deb" "$root"
  count=$((count + 1))
done
# Debian's pyconfig.h picks the arch's own by compiler macros from
# <ARCH-linux-gnu/python3.11/pyconfig.h>, which a cross compiler's include path
# lacks: the aarch64 one in its place (the build and torch.compile include it).
cp "$root/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" "$root/usr/include/python3.11/pyconfig.h"
# qemu 7.2 shows the guest the host's x86 /proc/cpuinfo, on which torch's
# cpuinfo (pytorch/cpuinfo) crashes; qemu-user reads a guest's absolute paths
# under QEMU_LD_PREFIX first, so these stand in: a Neoverse N1 (QEMU_CPU=neoverse-n1).
mkdir -p "$root/proc" "$root/sys/devices/system/cpu/cpu0/regs/identification"
cat >"$root/proc/cpuinfo" <<CPUINFO
processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1

CPUINFO
echo 0x00000000413fd0c1 >"$root/sys/devices/system/cpu/cpu0/regs/identification/midr_el1"
qemu-aarch64-static -L "$root" "$root/usr/bin/python3.11" -c 'import platform, ssl, sqlite3, ctypes; assert platform.machine() == "aarch64"'
echo "$want" >"$stamp"
echo "arm64_root: $root: $count packages, $(du -sm "$root" | cut -f1) MiB" >&2
