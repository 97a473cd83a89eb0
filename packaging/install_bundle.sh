#!/usr/bin/env bash
# Install a built bundle: the folder under PREFIX/lib/rigspark, both commands linked into
# PREFIX/bin, and the .desktop file, AppStream metainfo and icons under PREFIX/share.
# Usage: packaging/install_bundle.sh [BUNDLE_DIR] [PREFIX]
#   defaults: dist/RigSpark and ~/.local (per user); use /usr/local as root for everyone.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=$(cd "${1:-$ROOT/dist/RigSpark}" && pwd)
PREFIX=${2:-$HOME/.local}
DEST=$PREFIX/lib/rigspark

[ -x "$BUNDLE/rigspark" ] || { echo "install_bundle: no bundle at $BUNDLE (run make bundle)" >&2; exit 2; }
rm -rf "$DEST"
mkdir -p "$DEST" "$PREFIX/bin" "$PREFIX/share"
cp -a "$BUNDLE/." "$DEST/"
# The bootloader follows the link to find its _internal/ folder.
ln -sfn "$DEST/rigspark" "$PREFIX/bin/rigspark"
ln -sfn "$DEST/rigspark-plan" "$PREFIX/bin/rigspark-plan"
cp -a "$BUNDLE/share/." "$PREFIX/share/"
if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$PREFIX/share/applications" || true
fi
echo "install_bundle: installed to $DEST; commands in $PREFIX/bin (make sure it is on PATH)"
