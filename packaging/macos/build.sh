#!/usr/bin/env bash
# Build SpecDeck for macOS: llama-cpp-python with Metal, SpecDeck.app and a .dmg.
#
#   bash packaging/macos/build.sh
#
# Needs: macOS 12+, Xcode command line tools (xcode-select --install), Python 3.10-3.12
# (python.org installer or Homebrew). Apple Silicon builds use Metal; on Intel Macs pass
# SPECDECK_VARIANT=cpu.
#
# Output: dist/SpecDeck.app and dist/SpecDeck-<version>-macos-<arch>.dmg
#
# Environment:
#   PYTHON                      interpreter used to create the build venv (default python3)
#   SPECDECK_VARIANT            metal (default) or cpu
#   SPECDECK_SKIP_LLAMA_BUILD=1 keep the llama-cpp-python already in the venv
#   SPECDECK_CODESIGN_IDENTITY  "Developer ID Application: ..." to sign; default ad-hoc ("-")
#   SPECDECK_NOTARY_PROFILE     notarytool keychain profile; when set the .dmg is notarized
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
VARIANT="${SPECDECK_VARIANT:-metal}"
VENV="$ROOT/.venv-build-$VARIANT"
PY="$VENV/bin/python"
LLAMA_VERSION="0.3.36"
IDENTITY="${SPECDECK_CODESIGN_IDENTITY:--}"
log() { printf '\033[1m[build]\033[0m %s\n' "$*"; }

[ "$(uname -s)" = Darwin ] || { echo "this script runs on macOS only" >&2; exit 2; }
[ -x "$PY" ] || "${PYTHON:-python3}" -m venv "$VENV"
"$PY" -m pip install --quiet --upgrade pip

# --- llama-cpp-python --------------------------------------------------------------------
if [ "${SPECDECK_SKIP_LLAMA_BUILD:-0}" != 1 ]; then
    if [ "$VARIANT" = metal ]; then
        # Metal shaders are embedded into libggml-metal (no default.metallib to ship).
        export CMAKE_ARGS="-DGGML_METAL=on -DGGML_METAL_EMBED_LIBRARY=on"
    else
        export CMAKE_ARGS="-DGGML_METAL=off -DGGML_NATIVE=off"
    fi
    export MACOSX_DEPLOYMENT_TARGET="${MACOSX_DEPLOYMENT_TARGET:-12.0}"
    log "building llama-cpp-python $LLAMA_VERSION with CMAKE_ARGS=$CMAKE_ARGS"
    FORCE_CMAKE=1 "$PY" -m pip install --force-reinstall --no-cache-dir \
        --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_VERSION"
fi
log "installing SpecDeck's dependencies and PyInstaller"
"$PY" -m pip install --quiet . "pyinstaller>=6.10"

# --- SpecDeck.app --------------------------------------------------------------------------
VERSION="$("$PY" -c 'import app; print(app.__version__)')"
ARCH="$(uname -m)"
log "PyInstaller: SpecDeck $VERSION ($ARCH, $VARIANT)"
rm -rf dist/SpecDeck dist/SpecDeck.app
SPECDECK_CODESIGN_IDENTITY="$IDENTITY" "$PY" -m PyInstaller --noconfirm --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/specdeck.spec
APP="dist/SpecDeck.app"
[ -d "$APP" ] || { echo "PyInstaller did not produce $APP" >&2; exit 1; }

# Sign the whole bundle (ad-hoc by default: enough to run on the building Mac and on Apple
# Silicon; a Developer ID identity plus notarization is needed for Gatekeeper elsewhere).
SIGN_ARGS=(--force --deep --sign "$IDENTITY")
[ "$IDENTITY" = "-" ] || SIGN_ARGS+=(--options runtime --timestamp)
codesign "${SIGN_ARGS[@]}" "$APP"
codesign --verify --deep --strict "$APP"

log "checking the frozen app"
"$APP/Contents/MacOS/SpecDeck" --version
/usr/libexec/PlistBuddy -c 'Print :CFBundleIdentifier' "$APP/Contents/Info.plist"

# --- .dmg --------------------------------------------------------------------------------
SUFFIX=""; [ "$VARIANT" = metal ] || SUFFIX="-$VARIANT"
DMG="dist/SpecDeck-$VERSION-macos-$ARCH$SUFFIX.dmg"
STAGE="build/dmg"
rm -rf "$STAGE" "$DMG"; mkdir -p "$STAGE"
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"   # drag-and-drop target in the window
log "dmg: $DMG"
hdiutil create -volname "SpecDeck $VERSION" -srcfolder "$STAGE" -fs HFS+ -format UDZO -ov "$DMG"
rm -rf "$STAGE"
if [ "$IDENTITY" != "-" ]; then codesign --force --sign "$IDENTITY" --timestamp "$DMG"; fi
if [ -n "${SPECDECK_NOTARY_PROFILE:-}" ]; then
    xcrun notarytool submit "$DMG" --keychain-profile "$SPECDECK_NOTARY_PROFILE" --wait
    xcrun stapler staple "$DMG"
fi
log "done: $APP ($(du -sh "$APP" | cut -f1)), $DMG ($(du -sh "$DMG" | cut -f1))"
