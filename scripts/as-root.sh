# Sourced by the ensure-*.sh scripts: `as_root CMD...` runs CMD as root (directly, or
# through sudo), or fails saying the packages must be installed by hand.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "error: installing packages needs root and this user has no sudo; run as root: $*" >&2
    return 1
  fi
}
