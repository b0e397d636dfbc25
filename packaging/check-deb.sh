#!/usr/bin/env bash
# Builds the Debian package and checks it as an administrator meets it: installs it with
# dpkg -i, runs the installed binary (its size, `--version` naming this commit, the packaged
# config read the way the unit reads it), renders every installed man page, sources the bash
# completion, verifies the systemd units (the service and the timer example), then removes
# the package (only its conffile may stay) and purges it (nothing may stay).
#
# Run as root, where installing a package is fine (CI; a container or VM): `bash
# packaging/check-deb.sh`. It refuses to touch a linerate package that is installed already.
# The only network traffic is none: the server it starts listens on 127.0.0.1 and is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

# shellcheck source=packaging/lib.sh
source packaging/lib.sh

[ "$(id -u)" -eq 0 ] || fail "run as root: this installs and removes the linerate package"
if dpkg-query -W -f='${Status}' linerate 2>/dev/null | grep -q 'installed\|config-files'; then
  fail "a linerate package is installed already; remove it first (dpkg -P linerate)"
fi

missing=""
command -v man >/dev/null 2>&1 || missing="$missing man-db"
command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

step "build the package"
deb=$(bash packaging/build-deb.sh | tail -1)
[ -f "$deb" ] || fail "build-deb.sh did not name a package file (got: $deb)"
echo "$deb: $(stat -c %s "$deb") bytes"

# From here on, whatever fails, the package does not stay installed.
trap 'dpkg -P linerate >/dev/null 2>&1 || true' EXIT

step "install: dpkg -i"
dpkg -i "$deb" >/dev/null
# The package's own paths: its files, and its directories (the ones named after it; /usr and
# /usr/share/man are everyone's).
own=$(dpkg -L linerate | while IFS= read -r path; do
  if [ ! -d "$path" ] || [[ "$path" == *linerate* ]]; then printf '%s\n' "$path"; fi
done)
conffiles=$(dpkg-query -W -f='${Conffiles}\n' linerate | awk 'NF {print $1}')
[ "$conffiles" = /etc/linerate/server.toml ] || fail "conffiles are [$conffiles], not /etc/linerate/server.toml"

step "the binary: under 10 MB, --version names the commit"
size=$(stat -c %s /usr/bin/linerate)
echo "/usr/bin/linerate: $size bytes"
[ "$size" -lt 10000000 ] || fail "/usr/bin/linerate is $size bytes, not under 10 MB"
version=$(/usr/bin/linerate --version)
echo "$version"
if commit=$(git -c safe.directory='*' rev-parse --short=12 HEAD 2>/dev/null); then
  case "$version" in
    *"($commit)"* | *"($commit-dirty)"*) ;;
    *) fail "\`linerate --version\` ($version) does not name the commit $commit" ;;
  esac
else
  case "$version" in *"(unknown commit)"*) ;; *) fail "not a git checkout, yet: $version" ;; esac
fi

step "the packaged config, read as the unit reads it (server on 127.0.0.1 only)"
log=$(mktemp)
timeout 3 /usr/bin/linerate server --config /etc/linerate/server.toml -B 127.0.0.1 -p 0 >"$log" 2>&1 || true
grep -q 'Server listening on 127.0.0.1:' "$log" || fail "the server did not start with the packaged config: $(cat "$log")"
rm -f "$log"

step "man pages: each renders without a warning"
pages=$(printf '%s\n' "$own" | grep '^/usr/share/man/man1/.*\.1\.gz$')
subcommands=$(/usr/bin/linerate --help | awk '/^Commands:/ {on = 1; next} /^$/ {on = 0} on && /^  [a-z]/ && $1 != "help" {n++} END {print n}')
[ "$(printf '%s\n' "$pages" | wc -l)" -eq $((subcommands + 1)) ] ||
  fail "$(printf '%s\n' "$pages" | wc -l) man pages for linerate and $subcommands subcommands"
for page in $pages; do
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l $page failed: $warnings"
  [ -z "$warnings" ] || fail "man -l $page: $warnings"
done
main=$(MANWIDTH=80 man -l /usr/share/man/man1/linerate.1.gz 2>/dev/null)
for section in "EXIT STATUS" ENVIRONMENT FILES; do
  printf '%s\n' "$main" | grep -q "^$section\$" || fail "linerate(1) has no $section section"
done
man -w linerate-server >/dev/null || fail "man cannot find linerate-server(1) by name"

step "shell completions where the shells look for them"
for f in /usr/share/bash-completion/completions/linerate /usr/share/zsh/vendor-completions/_linerate \
  /usr/share/fish/vendor_completions.d/linerate.fish; do
  [ -s "$f" ] || fail "$f is missing or empty"
done
bash -c 'source /usr/share/bash-completion/completions/linerate && complete -p linerate' >/dev/null ||
  fail "the bash completion does not load"

step "systemd units: systemd-analyze verify"
units=$(mktemp -d)
# A template is verified as an instance; the instance names a host, as an administrator would.
for kind in service timer; do
  cp "/usr/share/doc/linerate/examples/linerate-probe@.$kind" "$units/linerate-probe@127.0.0.1.$kind"
done
# Any line it prints is a finding (an unknown key is only a warning to its exit status).
verify=$(systemd-analyze verify /usr/lib/systemd/system/linerate-server.service \
  "$units/linerate-probe@127.0.0.1.service" "$units/linerate-probe@127.0.0.1.timer" 2>&1) ||
  fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"
rm -rf "$units"
systemd-analyze security --offline=yes --no-pager /usr/lib/systemd/system/linerate-server.service |
  tail -1

step "remove: dpkg -r leaves the conffile only"
dpkg -r linerate >/dev/null
status=$(dpkg-query -W -f='${Status}' linerate)
[ "$status" = "deinstall ok config-files" ] || fail "status after dpkg -r: $status"
while IFS= read -r path; do
  [ -e "$path" ] || continue
  [ "$path" = /etc/linerate ] && continue
  printf '%s\n' "$conffiles" | grep -qxF "$path" || fail "$path is left after dpkg -r"
done <<<"$own"
[ -f /etc/linerate/server.toml ] || fail "dpkg -r removed the conffile"

step "purge: dpkg -P leaves nothing"
dpkg -P linerate >/dev/null
trap - EXIT
if dpkg-query -W -f='${Status}' linerate 2>/dev/null | grep -q 'installed\|config-files'; then
  fail "dpkg still knows linerate after dpkg -P"
fi
while IFS= read -r path; do
  [ ! -e "$path" ] || fail "$path is left after dpkg -P"
done <<<"$own"
[ ! -e /etc/linerate ] || fail "/etc/linerate is left after dpkg -P"

echo "check-deb: OK in $((SECONDS - start)) s"
