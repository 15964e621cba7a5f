"""User-controlled text made inert for the injected block (DESIGN §6.3, issue 27 item 3).

Every memory, profile sentence, reminder and cue sits inside a system message, between the
block's own markup (`<userMemories>` … `</userMemories>`, "- [date] " lines). A text placed
there must not be able to:

- **close or open a tag**: every angle-bracket look-alike (`<` and its full-width, small,
  mathematical, CJK, ornament, quotation-mark and syllabics forms, `BRACKETS_OPEN` /
  `BRACKETS_CLOSE`) and the HTML entities of `<` and `>` become `(` and `)`, and the
  block's tag name, however it is spelled — case, zero-width characters inside it, Cyrillic,
  small-capital or mathematical look-alike letters — is written as the two words
  "user memories";
- **reorder what is shown**: bidi controls (U+202A–202E, U+2066–2069, U+200E/F, U+061C) and
  every other format character (zero-width spaces, joiners next to ASCII, tag characters)
  are removed, and the text is put on one line;
- **make the client fetch a URL**: a markdown image becomes `[image: alt]` without its URL,
  a link `[text](url)` becomes its text with the URL defanged, and every URL left (autolinks,
  reference definitions, `<img src=…>`, bare `www.` hosts, protocol-relative `//host`) is
  defanged — `https[:]//evil[.]example/…` — so no markdown renderer links or loads it;
- **speak as another role**: chat-template tokens (`<|im_start|>`, `[INST]`, `<<SYS>>`,
  `</s>`) are removed, a role name followed by a colon ("SYSTEM:", "assistant:", "### Instruction:")
  loses its colon and heading marks ("SYSTEM -", "Instruction -").

Look-alikes are found on a *skeleton* of the text: NFKC (full-width and mathematical forms),
then the Unicode confusables table of the `confusable-homoglyphs` package (UTS #39 data) for
letters that only look Latin, then case folding. The replacements are made in the original
text, so a memory in another script keeps its letters.
"""

from __future__ import annotations

import html
import re
import unicodedata
from functools import lru_cache

# Derived, not chosen: every character whose Unicode name is a single left/right angle bracket,
# angle quotation mark, chevron bracket or less-/greater-than sign, plus what the confusables
# table lists as looking like `<` or `>`; `test_the_bracket_sets_match_their_derivation`
# recomputes them. Double ones (« » 《 》 ⟪ ⟫) are quotation and title marks in French, Russian
# and Chinese and stay: without the tag name after them they open nothing.
BRACKETS_OPEN = frozenset(
    "<\u02c2\u1438\u16b2\u2039\u2329\u276c\u276e\u2770\u27e8\u2991\u29fc\u3008"
    "\ufe3f\ufe64\uff1c\U0001d236"
)
BRACKETS_CLOSE = frozenset(
    ">\u02c3\u1433\u203a\u232a\u276d\u276f\u2771\u27e9\u2992\u29fd\u3009"
    "\ufe40\ufe65\uff1e\U0001d237\U00016f3f"
)
_ENTITY_OPEN = re.compile(r"&lt;?|&#0*60;?|&#x0*3c;?", re.IGNORECASE)
_ENTITY_CLOSE = re.compile(r"&gt;?|&#0*62;?|&#x0*3e;?", re.IGNORECASE)

# Invisible characters that are not of category Cf but show nothing (Hangul fillers,
# the combining grapheme joiner, the Mongolian vowel separator).
_INVISIBLE_OTHER = frozenset("\u034f\u115f\u1160\u180e\u3164\uffa0")
_JOINERS = frozenset("\u200c\u200d")  # kept between non-ASCII characters (emoji, Persian)


def _drop_invisible(text: str) -> str:
    """`text` without format and control characters (bidi controls among them); ZWJ/ZWNJ
    stay only between two non-ASCII characters, where emoji sequences and scripts need them.
    """
    out: list[str] = []
    for i, c in enumerate(text):
        category = unicodedata.category(c)
        if c in _JOINERS:
            before = text[i - 1] if i else "a"
            after = text[i + 1] if i + 1 < len(text) else "a"
            if not before.isascii() and not after.isascii():
                out.append(c)
            continue
        if category == "Cf" or c in _INVISIBLE_OTHER:
            continue
        if category == "Cc" and not c.isspace():
            continue
        out.append(c)
    return "".join(out)


@lru_cache(maxsize=1)
def _latin_look_alikes() -> dict[str, str]:
    """Each character the confusables table lists as looking like an ASCII letter or digit →
    that letter (lower case).
    """
    from confusable_homoglyphs.utils import load

    table: dict[str, list[dict[str, str]]] = load("confusables.json")
    latin: dict[str, str] = {}
    for char, homoglyphs in table.items():
        if len(char) == 1 and char.isascii() and char.isalnum():
            for h in homoglyphs:
                glyph = h["c"]
                if len(glyph) == 1 and not glyph.isascii():
                    latin.setdefault(glyph, char.lower())
        elif len(char) == 1 and not char.isascii():
            for h in homoglyphs:
                glyph = h["c"]
                if len(glyph) == 1 and glyph.isascii() and glyph.isalnum():
                    latin.setdefault(char, glyph.lower())
                    break
    return latin


def skeleton(text: str) -> tuple[str, list[int]]:
    """`text` as it looks: NFKC, look-alike letters as ASCII, case-folded; and for each
    skeleton character the index of the `text` character it came from.

    `text` should already be without invisible characters (`_drop_invisible`).
    """
    if text.isascii():
        return text.lower(), list(range(len(text)))
    chars: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        shown = _looks_like(c)
        chars.append(shown)
        origin.extend([i] * len(shown))
    return "".join(chars), origin


@lru_cache(maxsize=65536)
def _looks_like(char: str) -> str:
    """What `char` looks like: NFKC, look-alike letters as ASCII, case-folded; nothing for a
    joiner (kept between two non-ASCII letters, it must not split a look-alike tag name).
    """
    if unicodedata.category(char) == "Cf":
        return ""
    latin = _latin_look_alikes()
    return "".join(
        latin.get(n) or latin.get(n.upper()) or n.casefold()
        for n in unicodedata.normalize("NFKC", char)
    )


@lru_cache(maxsize=65536)
def _bracket(char: str) -> str:
    """`(` or `)` for an angle-bracket look-alike (also one NFKC turns into `<` or `>`),
    else `char`.
    """
    if char in BRACKETS_OPEN:
        return "("
    if char in BRACKETS_CLOSE:
        return ")"
    if char.isascii():
        return char
    compatible = unicodedata.normalize("NFKC", char)
    return "(" if "<" in compatible else ")" if ">" in compatible else char


def _replace_on_skeleton(text: str, pattern: re.Pattern[str], replacement: str) -> str:
    r"""`text` with each span whose skeleton matches `pattern` replaced by `replacement`
    (`\1`-style groups are not supported: the replacement is literal).
    """
    skel, origin = skeleton(text)
    spans = [
        (origin[m.start()], origin[m.end() - 1] + 1)
        for m in pattern.finditer(skel)
        if m.end() > m.start()
    ]
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end in spans:
        if start < last:
            continue
        out.append(text[last:start])
        out.append(replacement)
        last = end
    out.append(text[last:])
    return "".join(out)


# the block's tag name, with anything but letters between its two words
_TAG_NAME = re.compile(r"user[^a-z0-9]{0,3}memor(?:ies|y)")
# chat-template tokens of common models, after brackets became parentheses
_TEMPLATE_TOKEN = re.compile(
    r"\(\|[^|()]{0,40}\|\)|\[/?(?:inst|sys|system)\]|\(\(/?sys\)\)|\(/?s\)|\(/?(?:bos|eos)\)"
)
_ROLES = (
    "system|assistant|user|human|ai|developer|model|tool|function|bot|instruction|"
    "instructions|response|input|context|sistema|systeme|systeem|systemet|systemu|"
    "sistem|asistente|assistente|assistent|asystent|система|ассистент|"
    "пользователь|システム|系统|系統"
)
# a role name ended by a colon (or a heading that names a role), where a line or sentence
# could start: text start, after whitespace, punctuation or a bracket
_ROLE_PREFIX = re.compile(
    rf"(?:^|(?<=[\s.!?;:,)\]\-*_>|\"'`]))(?:#{{1,6}}[ \t]*)?(?:{_ROLES})\s*(?::|\uff1a|-{{2,}}|=>)"
)
_ROLE_HEADING = re.compile(rf"(?:^|(?<=\s))#{{1,6}}\s*(?=(?:{_ROLES})\b)")

_MD_IMAGE = re.compile(r"!\s*\[([^\]]{0,500})\]\s*(?:\([^)]*\)?|\[[^\]]*\]?)")
_MD_LINK = re.compile(r"\[([^\]]{0,500})\]\s*\(\s*([^)\s]*)[^)]*\)?")
_MD_REFERENCE = re.compile(r"\[([^\]]{1,100})\]\s*:\s*")
_BANG_BRACKET = re.compile(r"!\s*\[")
# a scheme and its colon (any "xyz://", and the schemes a link or image could use alone)
_SCHEME = re.compile(
    r"\b([a-z][a-z0-9+.\-]{1,30})\s*:\s*(?=//)|"
    r"\b(https?|ftps?|wss?|file|data|javascript|vbscript|mailto|blob|smb|sftp)\s*:",
    re.IGNORECASE,
)
_HOST_AFTER = re.compile(
    r"(\[:\]//|(?<![\w:/])//|\bwww\.)([\w\-]+(?:\.[\w\-]+)+)", re.IGNORECASE | re.UNICODE
)


def _defang(text: str) -> str:
    """Every URL made unfetchable: `https://a.example/x` → `https[:]//a[.]example/x`."""
    text = _SCHEME.sub(lambda m: f"{m.group(1) or m.group(2)}[:]", text)
    text = re.sub(r"\[:\]\s*//", "[:]//", text)

    def host(m: re.Match[str]) -> str:
        prefix = m.group(1)
        if prefix.lower() == "www.":
            prefix = "www[.]"
        elif prefix == "//":
            prefix = "[/]/"
        return prefix + m.group(2).replace(".", "[.]")

    return _HOST_AFTER.sub(host, text)


def _markdown_as_text(text: str) -> str:
    """Images as `[image: alt]`, links as their text and (defanged) URL, no reference
    definitions and no `![` left to start an image.
    """
    text = _MD_IMAGE.sub(lambda m: f"[image: {m.group(1).strip()}]", text)
    text = _MD_LINK.sub(
        lambda m: f"{m.group(1).strip()} ({m.group(2)})" if m.group(2) else m.group(1).strip(),
        text,
    )
    text = _MD_REFERENCE.sub(lambda m: f"{m.group(1)} - ", text)
    return _BANG_BRACKET.sub("[", text)


@lru_cache(maxsize=8192)
def inert(text: str) -> str:
    """`text` safe to place inside the injected block: one line, no tag, no bidi control,
    no fetchable URL, no role prefix (see the module docstring). Idempotent; pure.

    Args:
        text: any user-controlled text (a memory, a profile, a reminder or its cue).

    Returns:
        The text on one line; the same text when it held nothing of the above. Cached: the
        same memories are injected turn after turn.
    """
    text = html.unescape(text) if "&" in text else text
    text = _drop_invisible(text)
    text = _ENTITY_OPEN.sub("(", _ENTITY_CLOSE.sub(")", text))
    text = "".join(map(_bracket, text))
    text = _replace_on_skeleton(text, _TAG_NAME, "user memories")
    text = _markdown_as_text(text)
    text = _defang(text)
    text = _replace_on_skeleton(text, _TEMPLATE_TOKEN, " ")
    text = _neutralise_roles(text)
    return " ".join(text.split())


def _neutralise_roles(text: str) -> str:
    """Each role prefix ("SYSTEM:", "### Instruction:", a full-width "assistant:") without
    its colon and heading marks, in the text's own letters.
    """
    skel, origin = skeleton(text)
    matches = list(_ROLE_PREFIX.finditer(skel)) + list(_ROLE_HEADING.finditer(skel))
    if not matches:
        return text
    out: list[str] = []
    last = 0
    for m in sorted(matches, key=lambda m: m.start()):
        start, end = origin[m.start()], origin[m.end() - 1] + 1
        if start < last or end <= start:
            continue
        piece = text[start:end]
        word = re.sub("^[#\\s]+|[\\s:\uff1a=>\\-]+$", "", piece)
        out.append(text[last:start])
        out.append(f"{word} - " if m.re is _ROLE_PREFIX else "")
        last = end
    out.append(text[last:])
    return "".join(out)
