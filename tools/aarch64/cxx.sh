#!/usr/bin/env bash
# torch.compile's C++ compiler under qemu (CXX): the cross g++, with the
# -march=native that inductor asks for replaced by the CPU qemu emulates
# (QEMU_CPU=neoverse-n1); the cross g++ cannot know "native" of the guest.
args=()
for arg in "$@"; do
  if [ "$arg" = -march=native ]; then arg=-mcpu=neoverse-n1; fi
  args+=("$arg")
done
exec aarch64-linux-gnu-g++ "${args[@]}"
