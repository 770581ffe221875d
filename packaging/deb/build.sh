#!/bin/sh
# build.sh VERSION BIN OUT: builds OUT/crffd_VERSION_ARCH.deb with dpkg-deb
# from the binaries in BIN (make deb). Run from the repository's root.
set -eu
version=$1 bin=$2 out=$3
here=packaging/deb
arch=$(dpkg --print-architecture)
plugins="crff-kernel-gaussian crff-kernel-laplacian crff-kernel-matern crff-transport-grpc crff-transport-spool"

stage=$(mktemp -d)
chmod 0755 "$stage"
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$bin/crffd" "$stage/usr/bin/crffd"
for p in $plugins; do
	install -D -m 0755 "$bin/$p" "$stage/usr/lib/crffd/plugins/$p"
done

# The plugins' folder and SHA-256 pins, which the units read: a plugin
# that differs from the one shipped is refused.
install -d -m 0755 "$stage/etc/crffd/sites"
{
	echo "# Written by the crffd package $version: where its plugins are, and their"
	echo "# SHA-256 (crffd refuses a plugin that differs). The units read this file."
	echo "CRFFD_PLUGIN_DIR=/usr/lib/crffd/plugins"
	for p in $plugins; do
		key=$(echo "$p" | tr 'a-z-' 'A-Z_')
		echo "CRFFD_PLUGIN_SHA256_$key=$(sha256sum "$bin/$p" | cut -d' ' -f1)"
	done
} > "$stage/etc/crffd/plugins.env"
chmod 0644 "$stage/etc/crffd/plugins.env"

install -D -m 0644 "$here/crffd-site@.service" "$stage/lib/systemd/system/crffd-site@.service"
install -D -m 0644 "$here/crffd-coordinator.service" "$stage/lib/systemd/system/crffd-coordinator.service"

doc="$stage/usr/share/doc/crffd"
install -D -m 0644 "$here/copyright" "$doc/copyright"
install -m 0644 docs/operations.md "$doc/operations.md"
printf 'crffd (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- crffd developers <crffd@example.org>  %s\n' \
	"$version" "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
	gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# The C library the binaries link (Go's resolver and user lookup): the
# newest symbol version they need, as dpkg-shlibdeps would say.
libc=libc6
if command -v objdump >/dev/null; then
	v=$(for f in "$bin/crffd" $(for p in $plugins; do echo "$bin/$p"; done); do objdump -T "$f"; done |
		grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
	[ -n "$v" ] && libc="libc6 (>= $v)"
fi

install -d -m 0755 "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@LIBC@/$libc/" "$here/control.in" > "$stage/DEBIAN/control"
echo /etc/crffd/plugins.env > "$stage/DEBIAN/conffiles"
install -m 0755 "$here/postinst" "$here/postrm" "$stage/DEBIAN/"

mkdir -p "$out"
deb="$out/crffd_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
