# What scripts/setup.sh and scripts/test.sh need from the system, checked the same way by both
# (sourced, not run). Root installs what is missing with apt-get; anyone else gets the exact
# command to run and the script stops before it has installed anything.
# RLMKIT_CHECK_ONLY=1: root is told what would be installed, and nothing is.

# have_lib NAME: the dynamic linker finds the shared library NAME (libgomp.so.1, say). grep reads
# all of its input (no -q): under pipefail an early exit would fail the pipe on ldconfig's SIGPIPE.
have_lib() {
  { /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep "[[:space:]]$1[[:space:]]" >/dev/null
}

# debian_installed PACKAGE: dpkg says PACKAGE is installed (false where there is no dpkg).
debian_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep "ok installed" >/dev/null
}

# The Debian packages that provide the shared libraries the embedded model's engine (xllamacpp)
# links against, beyond libc: ldd on its extension lists them; a minimal Debian lacks libgomp1.
MODEL_LIBS="libgomp.so.1:libgomp1 libstdc++.so.6:libstdc++6 libgcc_s.so.1:libgcc-s1"

missing_model_libs() {
  local entry
  for entry in $MODEL_LIBS; do
    have_lib "${entry%%:*}" || printf '%s ' "${entry#*:}"
  done
}

# install_packages WHO PACKAGE...: nothing to do for no packages; root installs them; anyone
# else is told `sudo apt-get install PACKAGE...` and the script exits 1.
install_packages() {
  local who=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    if [ "${RLMKIT_CHECK_ONLY:-0}" = 1 ]; then
      echo "$who: would install with apt-get: $*"
      return 0
    fi
    echo "$who: installing with apt-get: $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    return 0
  fi
  echo "$who: these system packages are missing: $*" >&2
  echo "$who: install them, then run this again:  sudo apt-get install $*" >&2
  exit 1
}
