#!/usr/bin/env bash
# Builds a libicudata.so.72 holding only the ICU data pagoda reads, for machines without ICU (pack_carry.sh): ~5 KB
# xz-compressed instead of 7.5 MB. It exports the same icudt72_dat symbol, so the system's libicuuc.so.72 loads it.
#   bench/gpu/make_small_icudata.sh OUT_DIR      (writes OUT_DIR/libicudata.so.72)
# Needs icu-devtools (icupkg, genccode) and binutils, and builds from this machine's ICU 72 (Debian libicu72).
set -euo pipefail
OUT=${1:?output folder}
SYS=/usr/lib/x86_64-linux-gnu/libicudata.so.72
# Everything else pagoda uses is compiled into libicuuc itself: NFC, the character properties (Age, Alphabetic,
# White_Space, Cased, Case_Ignorable, general category, numeric type), simple and full case mapping and the property
# names UnicodeSet parses. The one data item read is the root word-break rules: ucasemap_utf8ToTitle (jinja's
# str.title()/capitalize()) opens a word BreakIterator for the root locale ("" in ucasemap_open). The dictionaries
# (CJK, Thai, ...) are left out: title-casing is called on one code point at a time, whose only boundaries are its
# ends with or without them, and a missing dictionary falls back to no-dictionary breaking without an error.
ITEMS=(brkitr/root.res brkitr/word.brk)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# The symbol's bytes are the whole .dat package (ICU's common-data format), the library's only .rodata.
objcopy -O binary --only-section=.rodata "$(readlink -f "$SYS")" "$tmp/icudt72l.dat"
mkdir "$tmp/items" "$tmp/small"
printf '%s\n' "${ITEMS[@]}" > "$tmp/items.txt"
icupkg -d "$tmp/items" -x "$tmp/items.txt" "$tmp/icudt72l.dat"
# --ignore-deps: root.res names the dictionaries and the other .brk files, which are left out on purpose.
icupkg --ignore-deps -s "$tmp/items" -a "$tmp/items.txt" new "$tmp/small/icudt72l.dat"
genccode -a gcc -e icudt72 -d "$tmp" "$tmp/small/icudt72l.dat" >/dev/null
mkdir -p "$OUT"
cc -shared -nostdlib -Wl,-soname,libicudata.so.72 -o "$OUT/libicudata.so.72" "$tmp/icudt72l_dat.S"
