# Sourced by the packaging scripts: how they report a step and a failure, named after the
# script (`check-deb: FAILED: ...`), so that a CI log says which check failed and why.
script_name=$(basename "$0" .sh)
fail() {
  echo "$script_name: FAILED: $*" >&2
  exit 1
}
step() { printf -- '--> %s\n' "$*"; }
