#!/usr/bin/env python3
"""Write tests/data/tok_hostile.txt: hostile input for the GPT-2 tokenizer tests.

Deterministic. Lines are split on "\\n" by the tests, so CR, CRLF, tabs, NUL and invalid UTF-8
bytes all stay inside lines. After changing this file, regenerate the expected ids with the
reference JS encoder (needs `make data` and node):
    /usr/bin/python3 tools/ref/make_tok_hostile.py
    node tools/ref/gpt2_encode.js data/gpt-3-encoder tests/data/tok_hostile.txt > tests/data/tok_hostile.ids
    node tools/ref/gpt2_encode.js data/gpt-3-encoder tests/data/tok_sample.txt > tests/data/tok_sample.ids
Characters are limited to those assigned by Unicode 14 (PCRE2 10.42's tables), so the JS
engine's newer tables agree on letters and digits.
"""
import random

u = lambda s: s.encode("utf-8")
lines = [
    # contractions, in and out of the pattern's cases
    u("it's they're we've I'm you'll he'd can't don't won't"),
    u("IT'S THEY'RE WE'VE I'M YOU'LL HE'D 'S 'T 's't're've'm'll'd"),
    u("rock'n'roll o'clock ''s ''' ' ' 'x ' s' ’s ‘quoted’ “double”"),
    u("James's Chris' the 90's '90s 'tis"),
    # spaces, tabs, CR, CRLF, trailing space, other Unicode spaces
    u("two  spaces   three    four     five      six"),
    u("   leading spaces and trailing spaces   "),
    u("\ttab\tseparated\t\tdouble\t \t mixed \t"),
    u("windows line\r"),
    u("carriage\rreturn\r\rinside"),
    u("nbsp\u00a0here ogham\u1680mark en\u2002em\u2003thin\u2009hair\u200a narrow\u202fnnbsp\u205fmath\u3000ideographic"),
    u("line\u2028separator para\u2029separator bom\ufefffeff zwsp\u200bzwsp zwj\u200dzwnj\u200c"),
    u("nel\u0085next mongolian\u180evowel vt\x0bff\x0cfs\x1cgs\x1drs\x1eus\x1f"),
    u(" \u00a0 \u00a0x  \u3000 y \t\u2003z"),
    # where JS's \s differs from PCRE2's: U+0085, U+180E, U+FEFF next to spaces
    u("a \u0085 b \u0085\u0085 c\u0085 \u0085d  \u0085"),
    u("a \ufeffb \ufeff \ufeff\ufeff c \ufeff"),
    # U+FEFF opening a line, and opening a valid run after an invalid byte (the reference script
    # dropped it as a byte order mark until it set ignoreBOM)
    u("\ufeffhello"),
    b"\x80" + u("\ufeffhi \ufeff"),
    u("x \u180e y \u180e\u180ez  \u180e"),
    u(" " * 40 + "x" + " " * 40),
    u("\t" * 10),
    u(" "),
    u(""),
    # digits
    u("1234567890 12345678901234567890123456789012345678901234567890 3.14159 1,000,000 -42 +7 1e-9"),
    u("0x1F 0b1010 007 2024-01-31 12:30:45 $1.99 €5 ¥100 100% #1 No.1"),
    u("arabic-indic ٠١٢٣٤٥٦٧٨٩ devanagari ०१२३४५६७८९ fullwidth １２３ superscript x²³ ½ ¼ Ⅻ ⅷ ①②"),
    u("a1b2c3 abc123def 123abc 1st 2nd 3rd 4th"),
    # mixed scripts
    u("Ελληνικά κείμενο, Русский текст, עברית, العربية, हिन्दी, ไทย, 한국어, 日本語のテキスト, 中文文本"),
    u("Ünïcödé façade naïve coöperate São Paulo Zürich Ærøskøbing İstanbul ǅemal ß ẞ"),
    u("mixedΑλφαBetaГамма漢字かなカナ한글"),
    u("Türkçe ﬁnal ligature ﬀ ﬃ Å Å (precomposed vs decomposed) ǆ"),
    # combining marks
    u("e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 combining: e\u0301\u0301\u0301 Z\u0351\u0366\u0300a\u0358\u0310l\u0323\u0352g\u0317\u036do\u0330"),
    u("\u0301leading combining \u0300\u0300 and alone \u20dd enclosed a\u20dd"),
    u("देवनागरी क्षत्रिय ஸ்ரீ"),
    # emoji
    u("emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇩🇪 ❤️ ☺︎ 1️⃣ #️⃣ 🧑🏿‍💻"),
    u("😀 😀😀 a😀b 😀123 😀's"),
    u("𝕳𝖊𝖑𝖑𝖔 𝐁𝐨𝐥𝐝 𝟏𝟐𝟑 (math alphanumerics) 𐍈 gothic"),
    # punctuation and symbols
    u("!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> /// \\\\\\ ||| ~~~ ```"),
    u("a.b,c;d:e!f?g'h\"i(j)k[l]m{n}o<p>q/r\\s|t~u`v^w@x#y$z%"),
    u("<|endoftext|> text after the special token <|endoftext|><|endoftext|>"),
    u("http://example.com/path?q=1&r=2#frag user@example.com C:\\Windows\\path"),
    u("→ ← ↑ ↓ ∀∃∈∉ ≤≥≠ ∑∏√∞ © ® ™ § ¶ † ‡ • … ‰ ′ ″ « » ¿ ¡ – —"),
    u("\x00nul\x00 \x01\x02\x03\x7f control chars \x1b[31mansi\x1b[0m"),
    # code
    u("def f(x):\treturn x**2  # comment"),
    u("    if (a && b) { return c->d[0]; }  "),
]
# invalid UTF-8 (bytes the JS encoder never sees; each becomes its byte token)
lines += [
    b"lone continuation \x80 \xbf \x80\x80\x80 end",
    b"truncated \xe2\x82 euro \xe2\x82\xac ok \xf0\x9f\x98 emoji",
    b"overlong \xc0\xaf \xc1\xbf \xe0\x80\xaf \xf0\x80\x80\xaf",
    b"surrogate \xed\xa0\x80 \xed\xbf\xbf max \xf4\x8f\xbf\xbf over \xf4\x90\x80\x80 \xf5\xf8\xfc\xfe\xff",
    b"caf\xe9 au lait na\xefve latin-1 \xa0nbsp",
    b"  \xff  x \xff\xfe\xfd y\xffz 's\xff't \xff's",
    b"\xff",
    b"digits 12\xff34 spaces   \x80   end",
]
# long lines
rnd = random.Random(1234)
lines.append(u("a" * 3000))
lines.append(u("1" * 2000))
lines.append(u(" " * 1500 + "end"))
# single long pieces (the tokenizer's O(n log n) merge path): letters, digits, punctuation
lines.append(u("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1500))))
lines.append(u(" " + "".join(rnd.choice("etaoinshrdluETAOIN") for _ in range(1200))))
lines.append(u("".join(rnd.choice("0123456789") for _ in range(1000))))
lines.append(u("".join(rnd.choice("!\"#$%&()*+,-./:;<=>?@[]^_`{|}~") for _ in range(1000))))
lines.append(u("".join(rnd.choice("aéßжλ漢字かな한") for _ in range(800))))
lines.append(u("".join(rnd.choice(["the ", "a", " ", "1", "é", "'s", "😀", "\t", "ab", "Z", "."]) for _ in range(2000))))

with open("tests/data/tok_hostile.txt", "wb") as f:
    f.write(b"\n".join(lines) + b"\n")
