# shellcheck shell=bash
# Sourced by the scripts that download Debian packages without touching the
# system's apt state (install_cuda_toolkit.sh's CUDA 12.4, aarch64/arm64_root.sh's
# arm64 root): a private apt configuration. APT_CONFIG is read before
# apt.conf.d and redirects Dir::Etc::parts, so the system's sources, lists,
# cache, dpkg status, pins and hooks (APT::Update::Post-Invoke...) are neither
# used nor changed. Security is apt's usual: the Release file must be signed by
# a key of the sources' signed-by keyring and every .deb must match the SHA256
# in the signed index; unsigned, weakly signed or unauthenticated is refused.

# private_apt DIR ARCH: apt state under DIR (downloads in DIR/cache/archives),
# for ARCH's packages; the caller writes DIR/sources.list, then runs apt-get
# with APT_CONFIG=DIR/apt.conf.
private_apt() {
  local dir=$1 arch=$2
  mkdir -p "$dir"/{apt.conf.d,preferences.d,lists/partial,cache/archives/partial,state}
  : >"$dir/status"
  {
    cat <<CONF
Dir::Etc::main "/dev/null";
Dir::Etc::parts "$dir/apt.conf.d";
Dir::Etc::sourcelist "$dir/sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::preferences "/dev/null";
Dir::Etc::preferencesparts "$dir/preferences.d";
Dir::State "$dir/state";
Dir::State::lists "$dir/lists";
Dir::State::status "$dir/status";
Dir::Cache "$dir/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APT::Install-Recommends "false";
Acquire::Languages "none";
CONF
    # Keep the system's proxy and Release-date settings (mirrors behind a
    # proxy or a snapshot), nothing else of its configuration.
    apt-config dump 2>/dev/null |
      grep -E '^Acquire::((https?|ftp)::Proxy|Check-Valid-Until|Check-Date)( |::)' || true
    cat <<CONF
Acquire::AllowInsecureRepositories "false";
Acquire::AllowWeakRepositories "false";
Acquire::AllowDowngradeToInsecureRepositories "false";
APT::Get::AllowUnauthenticated "false";
CONF
  } >"$dir/apt.conf"
  # apt downloads as user _apt where it can: let it write its lists and archives.
  chmod 755 "$dir"
  if ((EUID == 0)) && id _apt >/dev/null 2>&1; then chown -R _apt "$dir/lists" "$dir/cache"; fi
}
