#!/bin/sh
# Installs rtvm's C library the usual way: the header, the shared and the static library,
# and pkg-config files, under a prefix.
#
#   tools/install-c.sh [--prefix DIR] [--debug] [--libdir DIR]
#
#   --prefix DIR   install under DIR (default /usr/local)
#   --libdir DIR   library directory (default PREFIX/lib)
#   --debug        install the debug build instead of the release build
#
# Builds with `cargo build -p rtvm --lib` first (CARGO_TARGET_DIR is honoured). Then:
#   PREFIX/include/rtvm.h
#   LIBDIR/librtvm.so, LIBDIR/librtvm.a
#   LIBDIR/pkgconfig/rtvm.pc         shared:  pkg-config --cflags --libs rtvm
#   LIBDIR/pkgconfig/rtvm-static.pc  static:  pkg-config --cflags --libs rtvm-static
set -eu

prefix=/usr/local
libdir=
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --libdir) libdir=$2; shift 2 ;;
        --libdir=*) libdir=${1#--libdir=}; shift ;;
        --debug) profile=debug; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "install-c.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$libdir" ] || libdir=$prefix/lib

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac

if [ "$profile" = release ]; then
    (cd "$root" && cargo build --quiet -p rtvm --lib --release)
else
    (cd "$root" && cargo build --quiet -p rtvm --lib)
fi
out=$target/$profile
for f in librtvm.so librtvm.a; do
    [ -f "$out/$f" ] || { echo "install-c.sh: $out/$f was not built" >&2; exit 1; }
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
# What the static library needs from the system (rustc --print native-static-libs).
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

mkdir -p "$prefix/include" "$libdir/pkgconfig"
install -m 644 "$root/runtime/include/rtvm.h" "$prefix/include/rtvm.h"
install -m 755 "$out/librtvm.so" "$libdir/librtvm.so"
install -m 644 "$out/librtvm.a" "$libdir/librtvm.a"

cat > "$libdir/pkgconfig/rtvm.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=$libdir

Name: rtvm
Description: The memory-and-threads core of a managed runtime (shared library)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lrtvm
Libs.private: $static_libs
PC

cat > "$libdir/pkgconfig/rtvm-static.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=$libdir

Name: rtvm-static
Description: The memory-and-threads core of a managed runtime (static library)
Version: $version
Cflags: -I\${includedir}
Libs: \${libdir}/librtvm.a $static_libs
PC

echo "installed rtvm $version ($profile) under $prefix: include/rtvm.h, $libdir/{librtvm.so,librtvm.a,pkgconfig/rtvm.pc,pkgconfig/rtvm-static.pc}"
