#!/usr/bin/env bash
# Build SpecDeck's Linux bundle and packages.
#
#   bash packaging/linux/build.sh
#
# Produces, under dist/:
#   SpecDeck/                                   the PyInstaller one-folder bundle
#   SpecDeck-<ver>-linux-<arch>[-<variant>].tar.gz  the bundle + install.sh (per-user install)
#   specdeck_<ver>[+<variant>]_<debarch>.deb     Debian/Ubuntu package (/opt/specdeck, menu entry)
#   SpecDeck-<ver>-<arch>[-<variant>].AppImage   only when appimagetool is available
#                                               (PATH or $APPIMAGETOOL); the CI workflow has it
#
# Environment:
#   PYTHON             interpreter with SpecDeck's dependencies (default: .venv/bin/python)
#   SPECDECK_VARIANT   label for the llama.cpp build inside (cpu, cuda, ...); default cpu
#   SPECDECK_FORMATS   space-separated subset of "tar deb appimage" (default: all that can be built)
#   SPECDECK_DEB_COMPRESS  dpkg-deb compressor: gzip (default, ~20 s), xz (~30% smaller, minutes
#                          on 2 cores; the release workflow uses it) or zstd (dpkg >= 1.21.18)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
VARIANT="${SPECDECK_VARIANT:-cpu}"
FORMATS="${SPECDECK_FORMATS:-tar deb appimage}"
APP_ID="io.github.specdeck.SpecDeck"
DIST="$ROOT/dist"
BUNDLE="$DIST/SpecDeck"
T0=$(date +%s)

log() { printf '\033[1m[build]\033[0m %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

[ -x "$PYTHON" ] || { echo "no Python at $PYTHON (set PYTHON=...)" >&2; exit 2; }
VERSION="$("$PYTHON" -c 'import app; print(app.__version__)')"
ARCH="$(uname -m)"
case "$ARCH" in x86_64) DEBARCH=amd64 ;; aarch64) DEBARCH=arm64 ;; *) DEBARCH="$ARCH" ;; esac
SUFFIX=""; [ "$VARIANT" = cpu ] || SUFFIX="-$VARIANT"
log "SpecDeck $VERSION, $ARCH, llama.cpp variant: $VARIANT"

# --- tools -------------------------------------------------------------------------------
if ! "$PYTHON" -m PyInstaller --version >/dev/null 2>&1; then
    log "installing PyInstaller into $(dirname "$(dirname "$PYTHON")")"
    "$PYTHON" -m pip install --quiet "pyinstaller>=6.10"
fi
"$PYTHON" -c 'import llama_cpp' 2>/dev/null || {
    echo "llama-cpp-python is not installed in $PYTHON's environment" >&2; exit 2; }
if [ ! -f resources/icons/specdeck.icns ]; then
    log "icons missing: rendering them"
    "$PYTHON" packaging/make_icons.py
fi

# --- PyInstaller ---------------------------------------------------------------------------
log "PyInstaller ($("$PYTHON" -m PyInstaller --version))"
rm -rf "$BUNDLE"
"$PYTHON" -m PyInstaller --noconfirm --log-level WARN \
    --distpath "$DIST" --workpath "$ROOT/build/pyinstaller" packaging/specdeck.spec

# Strip what we compiled ourselves (libpython, the stdlib extension modules, llama.cpp).
# Wheel-provided libraries are left alone: they are stripped already and stripping
# auditwheel-patched ELF files breaks them.
if have strip; then
    find "$BUNDLE/_internal" -maxdepth 1 -name 'libpython3*.so*' -type f \
        -exec strip --strip-unneeded {} + 2>/dev/null || true
    find "$BUNDLE/_internal/python3"* "$BUNDLE/_internal/llama_cpp/lib" -name '*.so*' -type f \
        -exec strip --strip-unneeded {} + 2>/dev/null || true
fi
[ -x "$BUNDLE/SpecDeck" ] || { echo "build failed: $BUNDLE/SpecDeck missing" >&2; exit 1; }
log "bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE"

# --- shared pieces -------------------------------------------------------------------------
# Lay out the XDG files (desktop entry, icons, metainfo) under a prefix.
install_xdg_files() {  # $1 = prefix (e.g. pkgroot/usr), $2 = Exec value
    local prefix="$1" exec_cmd="$2" size
    install -d "$prefix/share/applications" "$prefix/share/metainfo"
    sed "s|^Exec=.*|Exec=$exec_cmd|; s|^TryExec=.*|TryExec=$exec_cmd|" \
        "resources/$APP_ID.desktop" > "$prefix/share/applications/$APP_ID.desktop"
    install -m 644 "resources/$APP_ID.metainfo.xml" "$prefix/share/metainfo/$APP_ID.metainfo.xml"
    for dir in resources/icons/hicolor/*/; do
        size="$(basename "$dir")"
        install -d "$prefix/share/icons/hicolor/$size/apps"
        install -m 644 "$dir"apps/* "$prefix/share/icons/hicolor/$size/apps/"
    done
}

# --- .tar.gz -------------------------------------------------------------------------------
if [[ " $FORMATS " == *" tar "* ]]; then
    TARBALL="$DIST/SpecDeck-$VERSION-linux-$ARCH$SUFFIX.tar.gz"
    STAGE="$ROOT/build/tar"
    rm -rf "$STAGE"; mkdir -p "$STAGE"
    cp -a "$BUNDLE" "$STAGE/SpecDeck"
    install -m 755 packaging/linux/install.sh "$STAGE/SpecDeck/install.sh"
    log "tar.gz: $TARBALL"
    tar -C "$STAGE" -czf "$TARBALL" SpecDeck
    rm -rf "$STAGE"
fi

# --- .deb ----------------------------------------------------------------------------------
if [[ " $FORMATS " == *" deb "* ]]; then
    if have dpkg-deb; then
        PKGROOT="$ROOT/build/deb/root"
        rm -rf "$ROOT/build/deb"; mkdir -p "$PKGROOT/opt" "$PKGROOT/usr/bin" "$PKGROOT/DEBIAN"
        cp -a "$BUNDLE" "$PKGROOT/opt/specdeck"
        ln -s /opt/specdeck/SpecDeck "$PKGROOT/usr/bin/specdeck"
        install_xdg_files "$PKGROOT/usr" specdeck
        install -d "$PKGROOT/usr/share/doc/specdeck"
        cat > "$PKGROOT/usr/share/doc/specdeck/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: SpecDeck
Source: https://github.com/specdeck/SpecDeck

Files: *
Copyright: 2026 SpecDeck developers
License: MIT
 Bundles Python, Qt (LGPL-3.0) via PySide6, llama.cpp (MIT), NumPy (BSD),
 pyqtgraph (MIT), superqt (BSD-3-Clause), QtPy (MIT), huggingface_hub (Apache-2.0),
 psutil (BSD-3-Clause) and platformdirs (MIT); their licence files are inside
 /opt/specdeck/_internal.
COPYRIGHT
        GLIBC="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
        GLIBC="${GLIBC:-2.31}"
        DEBVER="$VERSION"; [ "$VARIANT" = cpu ] || DEBVER="$VERSION+$VARIANT"
        cat > "$PKGROOT/DEBIAN/control" <<CONTROL
Package: specdeck
Version: $DEBVER
Architecture: $DEBARCH
Maintainer: SpecDeck developers <specdeck@users.noreply.github.com>
Installed-Size: $(du -sk "$PKGROOT" | cut -f1)
Depends: libc6 (>= $GLIBC), libgl1, libegl1, libfontconfig1, libfreetype6, libx11-6, libx11-xcb1, libxcb1, libxcb-icccm4, libxcb-keysyms1, libxkbcommon0
Recommends: libxcb-cursor0, libxkbcommon-x11-0, libwayland-client0, libwayland-cursor0, libwayland-egl1
Section: science
Priority: optional
Homepage: https://github.com/specdeck/SpecDeck
Description: local speculative decoding workbench on llama.cpp
 SpecDeck runs a small draft model and a large target model side by side on
 llama.cpp: the draft proposes tokens, the target verifies them in one batch,
 and the answer is exactly the target's, only sooner. Accepted tokens are
 coloured live and acceptance charts show how much the draft helps.
 .
 This package bundles its own Python, Qt and llama.cpp ($VARIANT build) in
 /opt/specdeck. Settings, models and conversations are kept in the user's
 XDG folders.
CONTROL
        DEB="$DIST/specdeck_${DEBVER}_${DEBARCH}.deb"
        log "deb: $DEB (${SPECDECK_DEB_COMPRESS:-gzip})"
        dpkg-deb --root-owner-group -Z"${SPECDECK_DEB_COMPRESS:-gzip}" --build "$PKGROOT" "$DEB" >/dev/null
        rm -rf "$ROOT/build/deb"
    else
        log "deb: skipped (dpkg-deb not found)"
    fi
fi

# --- AppImage (only where appimagetool exists) --------------------------------------------
if [[ " $FORMATS " == *" appimage "* ]]; then
    TOOL="${APPIMAGETOOL:-$(command -v appimagetool || true)}"
    if [ -n "$TOOL" ]; then
        APPDIR="$ROOT/build/SpecDeck.AppDir"
        rm -rf "$APPDIR"; mkdir -p "$APPDIR/usr/lib"
        cp -a "$BUNDLE" "$APPDIR/usr/lib/specdeck"
        install_xdg_files "$APPDIR/usr" SpecDeck
        sed -i '/^TryExec=/d' "$APPDIR/usr/share/applications/$APP_ID.desktop"
        cp "$APPDIR/usr/share/applications/$APP_ID.desktop" "$APPDIR/$APP_ID.desktop"
        cp resources/icons/specdeck-256.png "$APPDIR/$APP_ID.png"
        ln -s "$APP_ID.png" "$APPDIR/.DirIcon"
        cat > "$APPDIR/AppRun" <<'APPRUN'
#!/bin/sh
HERE="$(dirname "$(readlink -f "$0")")"
exec "$HERE/usr/lib/specdeck/SpecDeck" "$@"
APPRUN
        chmod 755 "$APPDIR/AppRun"
        APPIMAGE="$DIST/SpecDeck-$VERSION-$ARCH$SUFFIX.AppImage"
        log "AppImage: $APPIMAGE"
        ARCH="$ARCH" "$TOOL" --no-appstream "$APPDIR" "$APPIMAGE"
        rm -rf "$APPDIR"
    else
        log "AppImage: skipped (no appimagetool on PATH; set APPIMAGETOOL=/path/to/appimagetool)"
    fi
fi

log "done in $(( $(date +%s) - T0 )) s:"
ls -1sh "$DIST" | sed 's/^/    /'
