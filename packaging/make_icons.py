#!/usr/bin/env python3
"""Render SpecDeck's icon set from an SVG master.

The logo is a small deck of two rounded cards: a large, light *target* card
carrying rows of token pills (green = accepted by the target model, one red
pill = the first rejected draft token) and a smaller, warm *draft* card in
front of it with a double speed chevron.  A green check badge on the target
card's corner stands for "verified / exact".

Outputs (all under resources/icons/):

* ``specdeck.svg``         the master (1024x1024 viewBox), hand-tunable
* ``specdeck-small.svg``   a simplified variant used for the 16..32 px sizes,
                           where the token pills would only be noise
* ``hicolor/NxN/apps/io.github.specdeck.SpecDeck.png`` for the Linux icon theme
* ``specdeck-N.png``       flat PNG set (16 ... 1024)
* ``specdeck.ico``         Windows, 16..256 (BMP for <=48 px, PNG for 256)
* ``specdeck.icns``        macOS, PNG-based entries 16..1024

The .ico and .icns containers are written here directly (no Pillow needed),
so the script only needs PySide6 (QtSvg).  Run:

    python packaging/make_icons.py            # regenerate everything
    python packaging/make_icons.py --check    # verify the committed files are current
"""

from __future__ import annotations

import argparse
import io
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ICON_DIR = ROOT / "resources" / "icons"
APP_ID = "io.github.specdeck.SpecDeck"

PNG_SIZES = (16, 20, 24, 32, 40, 48, 64, 128, 256, 512, 1024)
HICOLOR_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 20, 24, 32, 40, 48, 64, 256)
SMALL_MAX = 32  # sizes <= this use the simplified artwork

# --------------------------------------------------------------------------- artwork

_DEFS = """
  <defs>
    <linearGradient id="tile" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#3B3F9E"/>
      <stop offset="0.55" stop-color="#262A6B"/>
      <stop offset="1" stop-color="#141633"/>
    </linearGradient>
    <linearGradient id="tileGloss" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#FFFFFF" stop-opacity="0.16"/>
      <stop offset="0.45" stop-color="#FFFFFF" stop-opacity="0"/>
    </linearGradient>
    <linearGradient id="target" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#FFFFFF"/>
      <stop offset="1" stop-color="#DCE3F2"/>
    </linearGradient>
    <linearGradient id="draft" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#FFB23F"/>
      <stop offset="1" stop-color="#F2561D"/>
    </linearGradient>
    <linearGradient id="check" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#34D399"/>
      <stop offset="1" stop-color="#059669"/>
    </linearGradient>
  </defs>"""

_TILE_SMALL = """
  <rect x="8" y="8" width="1008" height="1008" rx="200" ry="200" fill="url(#tile)"/>"""

_TILE = """
  <rect x="40" y="40" width="944" height="944" rx="212" ry="212" fill="url(#tile)"/>
  <rect x="40" y="40" width="944" height="944" rx="212" ry="212" fill="url(#tileGloss)"/>"""

# Target card: 500x640, tilted a little clockwise, upper right.
_TARGET_FULL = """
  <g transform="translate(560 470) rotate(8)">
    <rect x="-238" y="-300" width="500" height="640" rx="64" ry="64"
          fill="#05061A" fill-opacity="0.35"/>
    <rect x="-250" y="-320" width="500" height="640" rx="64" ry="64" fill="url(#target)"/>
    <!-- token rows: green accepted, one red rejected, grey pending -->
    <rect x="-180" y="-230" width="130" height="50" rx="25" fill="#10B981"/>
    <rect x="-35"  y="-230" width="95"  height="50" rx="25" fill="#10B981"/>
    <rect x="75"   y="-230" width="105" height="50" rx="25" fill="#10B981"/>
    <rect x="-180" y="-145" width="90"  height="50" rx="25" fill="#10B981"/>
    <rect x="-75"  y="-145" width="150" height="50" rx="25" fill="#10B981"/>
    <rect x="90"   y="-145" width="90"  height="50" rx="25" fill="#EF4444"/>
    <rect x="-180" y="-60"  width="150" height="50" rx="25" fill="#C3CBE0"/>
    <rect x="-15"  y="-60"  width="110" height="50" rx="25" fill="#C3CBE0"/>
  </g>"""

_TARGET_SMALL = """
  <g transform="translate(590 430) rotate(8)">
    <rect x="-270" y="-340" width="540" height="680" rx="80" ry="80" fill="url(#target)"/>
    <rect x="-190" y="-240" width="380" height="100" rx="50" fill="#10B981"/>
    <rect x="-190" y="-90" width="240" height="100" rx="50" fill="#10B981"/>
  </g>"""

# Draft card: 330x430, tilted counter-clockwise, lower left, in front.
_DRAFT_FULL = """
  <g transform="translate(360 640) rotate(-12)">
    <rect x="-150" y="-190" width="330" height="430" rx="52" ry="52"
          fill="#05061A" fill-opacity="0.40"/>
    <rect x="-165" y="-215" width="330" height="430" rx="52" ry="52" fill="url(#draft)"/>
    <rect x="-165" y="-215" width="330" height="430" rx="52" ry="52" fill="none"
          stroke="#FFFFFF" stroke-opacity="0.35" stroke-width="6"/>
    <path d="M -95 -80 L -5 0 L -95 80" fill="none" stroke="#FFFFFF" stroke-width="46"
          stroke-linecap="round" stroke-linejoin="round"/>
    <path d="M 15 -80 L 105 0 L 15 80" fill="none" stroke="#FFFFFF" stroke-width="46"
          stroke-linecap="round" stroke-linejoin="round"/>
  </g>"""

_DRAFT_SMALL = """
  <g transform="translate(380 640) rotate(-12)">
    <rect x="-170" y="-205" width="370" height="470" rx="70" ry="70"
          fill="#05061A" fill-opacity="0.45"/>
    <rect x="-185" y="-235" width="370" height="470" rx="70" ry="70" fill="url(#draft)"/>
    <path d="M -110 -105 L 0 0 L -110 105" fill="none" stroke="#FFFFFF" stroke-width="80"
          stroke-linecap="round" stroke-linejoin="round"/>
    <path d="M 25 -105 L 135 0 L 25 105" fill="none" stroke="#FFFFFF" stroke-width="80"
          stroke-linecap="round" stroke-linejoin="round"/>
  </g>"""

_CHECK_FULL = """
  <g transform="translate(770 745)">
    <circle cx="8" cy="14" r="126" fill="#05061A" fill-opacity="0.35"/>
    <circle cx="0" cy="0" r="126" fill="#FFFFFF"/>
    <circle cx="0" cy="0" r="104" fill="url(#check)"/>
    <path d="M -50 2 L -12 40 L 56 -38" fill="none" stroke="#FFFFFF" stroke-width="34"
          stroke-linecap="round" stroke-linejoin="round"/>
  </g>"""

_CHECK_SMALL = ""  # no badge at 16..32 px: it would be a smudge


def svg_master() -> str:
    return _svg(_TILE + _TARGET_FULL + _DRAFT_FULL + _CHECK_FULL, "SpecDeck")


def svg_small() -> str:
    return _svg(_TILE_SMALL + _TARGET_SMALL + _DRAFT_SMALL + _CHECK_SMALL,
                "SpecDeck (16-32 px)")


def _svg(body: str, title: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<!-- Generated by packaging/make_icons.py - edit there, then re-run it. -->\n"
        '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" '
        'width="1024" height="1024" viewBox="0 0 1024 1024">\n'
        f"  <title>{title}</title>"
        f"{_DEFS}{body}\n</svg>\n"
    )


# --------------------------------------------------------------------------- rendering


def _qt():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])
    return app, QBuffer, QByteArray, QIODevice, Qt, QImage, QPainter, QSvgRenderer


def render_png(svg: str, size: int) -> bytes:
    """Render *svg* at size x size and return PNG bytes (ARGB, premultiplied-safe)."""
    _app, QBuffer, QByteArray, QIODevice, Qt, QImage, QPainter, QSvgRenderer = _qt()
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    if not renderer.isValid():
        raise RuntimeError("SVG did not parse")
    # Supersample small sizes for cleaner anti-aliasing, then scale down smoothly.
    scale = 4 if size <= 64 else (2 if size <= 256 else 1)
    big = QImage(size * scale, size * scale, QImage.Format.Format_ARGB32_Premultiplied)
    big.fill(Qt.GlobalColor.transparent)
    painter = QPainter(big)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
    renderer.render(painter)
    painter.end()
    img = big
    if scale > 1:
        img = big.scaled(
            size, size, Qt.AspectRatioMode.IgnoreAspectRatio,
            Qt.TransformationMode.SmoothTransformation,
        )
    img = img.convertToFormat(QImage.Format.Format_ARGB32)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def _argb_rows(png: bytes):
    """Decode PNG -> (width, height, list of rows of BGRA bytes, top-down)."""
    _app, _QBuffer, QByteArray, _QIODevice, _Qt, QImage, _QPainter, _R = _qt()
    img = QImage.fromData(QByteArray(png), "PNG").convertToFormat(QImage.Format.Format_ARGB32)
    w, h = img.width(), img.height()
    rows = []
    for y in range(h):
        # Format_ARGB32 is stored as 0xAARRGGBB native-endian -> B,G,R,A on little endian.
        line = bytes(img.constScanLine(y))[: w * 4]
        if sys.byteorder == "big":
            line = b"".join(line[i : i + 4][::-1] for i in range(0, len(line), 4))
        rows.append(line)
    return w, h, rows


# --------------------------------------------------------------------------- containers


def build_ico(pngs: dict[int, bytes]) -> bytes:
    """Multi-size ICO. 256 px is stored as PNG (Vista+), smaller as 32-bit BMP+mask
    so every Windows shell and resource compiler reads them."""
    images = []
    for size in sorted(pngs):
        if size >= 256:
            images.append((size, pngs[size]))
            continue
        w, h, rows = _argb_rows(pngs[size])
        header = struct.pack("<IiiHHIIiiII", 40, w, h * 2, 1, 32, 0, 0, 0, 0, 0, 0)
        xor = b"".join(reversed(rows))  # bottom-up
        mask_stride = ((w + 31) // 32) * 4
        mask_rows = []
        for row in reversed(rows):
            bits = bytearray(mask_stride)
            for x in range(w):
                if row[x * 4 + 3] == 0:
                    bits[x // 8] |= 0x80 >> (x % 8)
            mask_rows.append(bytes(bits))
        images.append((size, header + xor + b"".join(mask_rows)))
    out = io.BytesIO()
    out.write(struct.pack("<HHH", 0, 1, len(images)))
    offset = 6 + 16 * len(images)
    for size, data in images:
        dim = 0 if size >= 256 else size
        out.write(struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset))
        offset += len(data)
    for _size, data in images:
        out.write(data)
    return out.getvalue()


# OSType -> pixel size; all PNG-payload types understood by macOS 10.7+.
ICNS_TYPES = (
    (b"icp4", 16), (b"icp5", 32), (b"icp6", 64), (b"ic07", 128), (b"ic08", 256),
    (b"ic09", 512), (b"ic10", 1024), (b"ic11", 32), (b"ic12", 64), (b"ic13", 256),
    (b"ic14", 512),
)


def build_icns(pngs: dict[int, bytes]) -> bytes:
    chunks = []
    for ostype, size in ICNS_TYPES:
        data = pngs[size]
        chunks.append(ostype + struct.pack(">I", len(data) + 8) + data)
    toc = b"TOC " + struct.pack(">I", 8 + 8 * len(ICNS_TYPES)) + b"".join(
        ostype + struct.pack(">I", len(pngs[size]) + 8) for ostype, size in ICNS_TYPES
    )
    body = toc + b"".join(chunks)
    return b"icns" + struct.pack(">I", len(body) + 8) + body


# --------------------------------------------------------------------------- main


def generate() -> dict[Path, bytes]:
    """Return {path: content} for every generated file."""
    master, small = svg_master(), svg_small()
    files: dict[Path, bytes] = {
        ICON_DIR / "specdeck.svg": master.encode(),
        ICON_DIR / "specdeck-small.svg": small.encode(),
    }
    pngs = {s: render_png(small if s <= SMALL_MAX else master, s) for s in PNG_SIZES}
    for s in PNG_SIZES:
        files[ICON_DIR / f"specdeck-{s}.png"] = pngs[s]
    for s in HICOLOR_SIZES:
        files[ICON_DIR / "hicolor" / f"{s}x{s}" / "apps" / f"{APP_ID}.png"] = pngs[s]
    files[ICON_DIR / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"] = master.encode()
    files[ICON_DIR / "specdeck.ico"] = build_ico({s: pngs[s] for s in ICO_SIZES})
    files[ICON_DIR / "specdeck.icns"] = build_icns(pngs)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if any committed icon is missing (does not compare pixels)")
    args = ap.parse_args(argv)
    files = generate()
    if args.check:
        missing = [str(p.relative_to(ROOT)) for p in files if not p.is_file()]
        for m in missing:
            print(f"missing: {m}", file=sys.stderr)
        return 1 if missing else 0
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    total = sum(len(d) for d in files.values())
    print(f"wrote {len(files)} files to {ICON_DIR.relative_to(ROOT)} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
