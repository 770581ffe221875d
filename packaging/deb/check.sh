#!/bin/sh
# check.sh DEB: what CI checks of the package (issue 37): it installs, crffd
# runs from /usr/bin, systemd-analyze verify passes on both units without a
# word, removing it leaves /etc/crffd and /var/lib/crffd in place, and
# lintian finds no error. Needs root, dpkg, systemd and lintian.
set -eu
deb=$1
fail() { echo "check.sh: $*" >&2; exit 1; }

dpkg -i "$deb" >/dev/null
[ "$(command -v crffd)" = /usr/bin/crffd ] || fail "crffd is not /usr/bin/crffd"
crffd version
getent passwd crffd >/dev/null || fail "no crffd user"
[ "$(stat -c %U:%a /var/lib/crffd)" = crffd:750 ] || fail "/var/lib/crffd is $(stat -c %U:%a /var/lib/crffd), want crffd:750"
for p in /usr/lib/crffd/plugins/*; do
	key=$(basename "$p" | tr 'a-z-' 'A-Z_')
	grep -qx "CRFFD_PLUGIN_SHA256_$key=$(sha256sum "$p" | cut -d' ' -f1)" /etc/crffd/plugins.env || fail "no pin of $p"
done

# A template is verified as an instance; any word from verify (an unknown
# key, a missing binary) fails.
units=$(mktemp -d)
cp /lib/systemd/system/crffd-site@.service "$units/crffd-site@hospital-a.service"
cp /lib/systemd/system/crffd-coordinator.service "$units/"
out=$(systemd-analyze verify "$units/crffd-site@hospital-a.service" "$units/crffd-coordinator.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify said: $out"
rm -rf "$units"
echo "systemd-analyze verify: both units clean"

touch /var/lib/crffd/site.sqlite
dpkg -r crffd >/dev/null
[ ! -e /usr/bin/crffd ] || fail "/usr/bin/crffd is still there after dpkg -r"
[ -f /etc/crffd/plugins.env ] || fail "dpkg -r removed /etc/crffd/plugins.env"
[ -f /var/lib/crffd/site.sqlite ] || fail "dpkg -r removed /var/lib/crffd's data"
echo "dpkg -r: /etc/crffd and /var/lib/crffd left in place"
rm -f /var/lib/crffd/site.sqlite

# lintian warns of the missing manual page; errors fail.
lintian --fail-on error "$deb"
echo "lintian: no error"
