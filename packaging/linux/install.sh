#!/usr/bin/env bash
# Install the unpacked SpecDeck folder for the current user (no root needed):
#   ~/.local/opt/specdeck/          the program (this folder, copied)
#   ~/.local/bin/specdeck           command-line launcher
#   ~/.local/share/applications/    menu entry     ~/.local/share/icons/hicolor/  icons
#
#   ./install.sh              install or update
#   ./install.sh --uninstall  remove all of the above (settings and models are kept:
#                             they live in ~/.config/specdeck, ~/.local/share/specdeck, ~/.cache/specdeck)
set -euo pipefail
APP_ID="io.github.specdeck.SpecDeck"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
DEST="$HOME/.local/opt/specdeck"
BIN="$HOME/.local/bin"

refresh() {
    command -v update-desktop-database >/dev/null && update-desktop-database -q "$DATA/applications" || true
    command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$DEST" "$BIN/specdeck" "$DATA/applications/$APP_ID.desktop" "$DATA/metainfo/$APP_ID.metainfo.xml"
    find "$DATA/icons/hicolor" -name "$APP_ID.*" -delete 2>/dev/null || true
    refresh
    echo "SpecDeck removed. Your settings, models and conversations were kept."
    exit 0
fi

[ -x "$HERE/SpecDeck" ] || { echo "run this from the unpacked SpecDeck folder" >&2; exit 1; }
if [ "$HERE" != "$DEST" ]; then
    rm -rf "$DEST.new"; mkdir -p "$(dirname "$DEST")"
    cp -a "$HERE" "$DEST.new"
    rm -rf "$DEST"; mv "$DEST.new" "$DEST"
fi
RES="$DEST/_internal/resources"
mkdir -p "$BIN" "$DATA/applications" "$DATA/metainfo"
ln -sf "$DEST/SpecDeck" "$BIN/specdeck"
sed "s|^Exec=.*|Exec=\"$DEST/SpecDeck\"|; s|^TryExec=.*|TryExec=$DEST/SpecDeck|" \
    "$RES/$APP_ID.desktop" > "$DATA/applications/$APP_ID.desktop"
cp "$RES/$APP_ID.metainfo.xml" "$DATA/metainfo/"
for dir in "$RES"/icons/hicolor/*/; do
    size="$(basename "$dir")"
    mkdir -p "$DATA/icons/hicolor/$size/apps"
    cp "$dir"apps/* "$DATA/icons/hicolor/$size/apps/"
done
refresh
echo "SpecDeck installed: find it in your applications menu, or run 'specdeck'."
case ":$PATH:" in *":$BIN:"*) ;; *) echo "(add $BIN to PATH to use the 'specdeck' command)";; esac
