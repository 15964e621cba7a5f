"""Secret redaction: the one place that knows what a credential looks like (DESIGN §5.5).

Every text that enters the service passes through `redact` before it is stored or sent to
the LLM: the turn's texts when the turn is accepted, every memory written (extraction,
`/memory add` and `edit`, the HTTP API, consolidation summaries, chat summaries, reminders),
the core profile, audit snapshots, the messages of every LLM request and the log lines.

A secret is replaced by a placeholder naming its kind ("[redacted password]", "[redacted
card number]", …), so the fact around it stays readable ("User's home wifi password is
[redacted password]"). Callers decide what to do with a fact that is little more than a
placeholder (`mostly_redacted`).

Three layers, in this order:

- the detectors of detect-secrets (`service/core/secret_library.py`): provider patterns,
  assignments (`password: x`, `DB_PASSWORD=x`), private key blocks, high-entropy runs;
- formats it does not know (`service/core/secret_formats.py`, `seed_phrases.py`): more
  provider prefixes, signed URLs, TOTP seeds, Wi-Fi QR codes, command lines, connection
  strings, wallet keys, BIP-39 seed phrases;
- the rules below: shapes (the older provider keys, JWTs, bearer tokens, connection-string
  passwords, card numbers with the Luhn checksum and a length their scheme issues, IBANs with
  the ISO 13616 mod-97 checksum, US social security numbers) and *labels* in 30 languages
  ("password", "PIN", "door code", "cvv", "mot de passe", "Passwort", "contraseña", "senha",
  "пароль", "mật khẩu", "كلمة المرور", "パスワード", …) followed by a value: after ":" or "="
  any value; after a verb such as "is"/"est"/"ist"/"lautet" a value that is not an
  ordinary word (a key or code must look like one: "my API key was revoked" stays); with
  other words or nothing in between only a value that looks like a code (digits, mixed case
  or symbols). PINs and codes need a digit and are not lengths ("6 digits long").

A label that ends a message or a line with no value ("my password is") makes the start of
the next one the value: `redact(text, previous=…)`, `redact_conversation`.

The measured corpora are `tests/corpora/secrets.json` and `secrets_v2.json` (secrets caught,
look-alikes kept; docs/discussions/secrets-and-instructions.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from service.core import secret_formats, secret_library, seed_phrases
from service.core.secret_library import Hit

PLACEHOLDER = re.compile(r"\[redacted(?: [A-Za-z ]+)?\]")
"""A placeholder this module writes ("[redacted]" of older rows included)."""

_NOT_PLACEHOLDER = r"(?!\[redacted)"


def placeholder(kind: str) -> str:
    """The text that replaces a secret of `kind` ("password" → "[redacted password]")."""
    return f"[redacted {kind}]"


# --- shapes -----------------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# scheme://user:password@host (the user may be empty: redis://:password@host)
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]{1,20}://[^\s:/@]*:)([^\s@/]+)(@)", re.IGNORECASE)
_SLACK_WEBHOOK = re.compile(r"(hooks\.slack\.com/services/)[A-Za-z0-9/_-]+")

# Provider keys by their documented prefixes; lengths are lower bounds of the real formats.
_KEYS = re.compile(
    "|".join(
        (
            r"\b(?:sk|pk|rk)[-_](?:live|test|proj)[-_][A-Za-z0-9_-]{6,}",  # Stripe, OpenAI project
            r"\bsk-ant-[A-Za-z0-9_-]{10,}",  # Anthropic
            r"\bsk-[A-Za-z0-9_-]{20,}",  # OpenAI and compatible servers
            r"\b(?:whsec|rk|sk)_[A-Za-z0-9]{10,}",  # Stripe webhook secrets, other Stripe keys
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",  # AWS key ids
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{22,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API keys
            r"\bGOCSPX-[A-Za-z0-9_-]{20,}",  # Google OAuth client secrets
            r"\bya29\.[A-Za-z0-9_-]{10,}",  # Google OAuth access tokens
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bnpm_[A-Za-z0-9]{36}",  # npm
            r"\bpypi-[A-Za-z0-9_-]{50,}",  # PyPI
            r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",  # SendGrid
            r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}",  # Telegram bots
            r"\bdop_v1_[a-f0-9]{64}",  # DigitalOcean
            r"\b(?:gsk|xai|r8)_[A-Za-z0-9]{20,}",  # Groq, xAI, Replicate
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
        )
    )
)
_BEARER = re.compile(r"\b(Bearer|Token|Basic)(\s+)(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}")
# A 40-character base64 run with upper case, lower case and a digit or slash: the shape of
# an AWS secret access key. Git hashes (lower-case hex) and UUIDs (dashes) never match.
_BASE64_40 = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_CARD = re.compile(r"(?<![\d.,+/-])\d(?:[ -]?\d){12,18}(?![\d])")
# Numbers that pass the Luhn check without being cards: IMEIs, order and tracking numbers.
_NOT_A_CARD = re.compile(
    r"\b(?:imei|serial|s/n|order|tracking|invoice|reference|ref|booking|ticket|parcel|"
    r"shipment|isbn|sku|bestell\w*|auftrag\w*|sendung\w*|commande|pedido|ordine|"
    r"заказ|phone|tel|mobile|fax|customer|kunden\w*|account id|member|loyalty)"
    r"[^.\n]{0,24}$",
    re.IGNORECASE,
)
_CARD_WORDS = re.compile(
    r"\b(?:card|karte|carte|tarjeta|cartão|carta|kaart|karta|карт\w*|visa|mastercard|amex|"
    r"discover|maestro|cc|credit|debit|kredit)",
    re.IGNORECASE,
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
# "G-558201 is your Google verification code": the code comes before its label
_CODE_FIRST = re.compile(
    r"\b(?:G-)?\d{4,8}(?=\s+is\s+your\b[^.\n]{0,40}?\b(?:code|OTP|PIN|passcode|password)\b)",
    re.IGNORECASE,
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _issuer_length_ok(digits: str) -> bool:
    """The lengths the card schemes issue for a number's prefix (ISO/IEC 7812 ranges): Visa
    13/16/19, Mastercard 16, Amex 15, Diners 14–16, JCB and Discover 16–19, UnionPay and
    Maestro 12–19. An IMEI (15 digits, "35…" or "86…") fits none.
    """
    n = len(digits)
    if digits[0] == "4":
        return n in (13, 16, 19)
    if digits[:2] in ("34", "37"):
        return n == 15
    if digits[:2] in ("51", "52", "53", "54", "55") or "2221" <= digits[:4] <= "2720":
        return n == 16
    if digits[:2] in ("36", "38", "39") or "300" <= digits[:3] <= "305":
        return 14 <= n <= 16
    if "3528" <= digits[:4] <= "3589":
        return 16 <= n <= 19
    if digits[0] in "56":
        return 12 <= n <= 19
    return digits[:4] in ("2200", "2201", "2202", "2203", "2204") and n == 16  # Mir


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if not (digits[0] in "23456" and _issuer_length_ok(digits) and _luhn(digits)):
        return match.group(0)
    before = match.string[max(0, match.start() - 60) : match.start()]
    if _NOT_A_CARD.search(before) and not _CARD_WORDS.search(before):
        return match.group(0)
    return placeholder("card number")


def _iban_valid(compact: str) -> bool:
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _iban(match: re.Match[str]) -> str:
    text = match.group(0)
    # the run may take in a following upper-case word: try shorter prefixes, longest first
    for end in range(len(text), 14, -1):
        candidate = text[:end]
        compact = candidate.replace(" ", "")
        if 15 <= len(compact) <= 34 and (end == len(text) or text[end] == " "):
            if _iban_valid(compact):
                return placeholder("IBAN") + text[end:]
    return text


def _base64_40(match: re.Match[str]) -> str:
    value = match.group(0)
    classes = (
        any(c.isupper() for c in value),
        any(c.islower() for c in value),
        any(c.isdigit() or c in "/+" for c in value),
    )
    return placeholder("key") if all(classes) else value


# --- labels -------------------------------------------------------------------------------

_PASSWORD_LABELS = (
    r"pass\s?phrase|passcode|password|passwort|passwd|pwd|pw|kennwort|contraseña|contrasena|"
    r"clave de acceso|clave|mot de passe|mdp|senha|palavra[- ]passe|wachtwoord|hasło|haslo|"
    r"hasła|hasłem|lösenord|losenord|salasana|salasanani|şifre|sifre|şifrem|şifresi|şifremi|"
    r"parolam|parolă|parola d'ordine|parola|пароль|пароля|паролем|парола|лозинка|heslo|"
    r"jelszó|jelszo|jelszavam|lozinka|šifra|geslo|adgangskode|kodeord|passord|"
    r"κωδικός πρόσβασης|κωδικός|συνθηματικό|סיסמה|סיסמא|הסיסמה|كلمة المرور|كلمة السر|"
    r"رمز عبور|گذرواژه|पासवर्ड|পাসওয়ার্ড|mật khẩu|mat khau|kata sandi|kata laluan|sandi|"
    r"nenosiri|wi-?fi key|wpa key|network key|wlan-schlüssel|clé wi-?fi|clé wpa"
)
_PIN_LABELS = (
    r"pin code|pin number|pin-code|pin-nummer|pin-koodi|pinkod|pin|pincode|geheimzahl|nip|"
    r"puk|пин-код|пин|код пин|mã pin|kod pin|numer pin|codice pin|código pin|code pin"
)
_CODE_LABELS = (
    r"(?:locker|door|gate|alarm|safe|access|security|entry|garage|lock|verification|"
    r"confirmation|one-time|login|2fa|two-factor|otp|auth|authentication|backup|recovery|"
    r"unlock|keypad|building|padlock|sms|key ?box|screen|phone)\s+code|combination|combo|"
    r"kombination|combinaison|combinación|combinacion|combinação|combinazione|kombinacja|"
    r"digicode|code d'entrée|code porte|türcode|torcode|kod do drzwi|код от двери|код двери|"
    r"recovery codes?|backup codes?|codes? de récupération|wiederherstellungscodes?|"
    r"códigos? de recuperación|códigos? de recuperação|codici di recupero|herstelcodes?|"
    r"zugangscode|türcode|sicherheitscode|bestätigungscode|verifizierungscode|tan|"
    r"cvv2?|cvc2?|csc|otp|one[- ]time password|código|codigo|code|codice"
)
_KEY_LABELS = (
    r"aws_secret_access_key|secret_access_key|secret access key|api[ _-]?key|apikey|"
    r"secret[ _-]?key|access[ _-]?key|private[ _-]?key|access[ _-]?token|auth[ _-]?token|"
    r"refresh[ _-]?token|bearer token|client[ _-]?secret|accountkey|sharedaccesskey|"
    r"license key|product key|recovery key|encryption key|2fa secret|totp secret|totp seed|"
    r"otp secret|setup key|authenticator key|wallet key|private key|token|secret"
)
_NUMBER_LABELS = r"ssn|social security number"
_PHRASE_LABELS = (
    r"seed phrase|seed words|recovery phrase|secret phrase|mnemonic|backup phrase|"
    r"wallet seed|phrase de récupération|seed-phrase|wiederherstellungsphrase|"
    r"frase semilla|frase de recuperación|frase de recuperação|frase di recupero"
)
_PASS_LABEL = r"pass"  # "pass: x" only; "boarding pass" reads on

_KIND_OF_GROUP = {
    "pw": "password",
    "pin": "PIN",
    "code": "code",
    "key": "key",
    "number": "number",
    "phrase": "passphrase",
    "pass": "password",
}
_LABEL = (
    rf"(?:(?P<phrase>{_PHRASE_LABELS})|(?P<pw>{_PASSWORD_LABELS})|(?P<pin>{_PIN_LABELS})|"
    rf"(?P<code>{_CODE_LABELS})|(?P<key>{_KEY_LABELS})|(?P<number>{_NUMBER_LABELS})|"
    rf"(?P<pass>{_PASS_LABEL}))"
)
_PREPOSITION = (
    r"for|to|of|on|at|from|in|de|du|des|del|della|di|da|do|für|fur|von|zu|van|voor|för|"
    r"meiner|meines|meinem|deiner|unserer|der"
)
# "password for the router", "PIN de mi tarjeta", "code d'accès", "Geheimzahl meiner EC-Karte"
_QUALIFIER = (
    rf"(?:(?:\s+(?:{_PREPOSITION})\s+|\s+d['\u2019]\s?)(?:[\w.'\u2019-]+\s+){{0,2}}?[\w.'\u2019-]+)"
)
_STRONG_SEP = r"\s*(?:[:=\uff1a]|=>|->)\s*"
_COPULA = (
    r"is(?:\s+now)?|was|are|es|era|est|était|etait|ist|lautet|war|è|é|är|er|je|jest|to|là|"
    r"adalah|ialah|yaitu|hi|هي|هو|היא|הוא|είναι|este|это|set to|changed to"
)
_WORD_SEP = rf"(?:\s+(?:{_COPULA})\s+|\s+[—–-]\s+)"
# Possessives between a label and its verb ("kata sandi saya adalah", "mật khẩu của tôi là")
_POSSESSIVE = (
    r"(?:\s+(?:saya|aku|ku|của tôi|của mình|của em|của anh|mío|mía|mio|mia|meu|minha|mine|"
    r"of mine|من|شما|الخاص بي|الخاصة بي|שלי|μου|моя|мой|мій|moje|mein|benim|mijn))"
)
_QUOTED = r"\"[^\"\n]{1,80}\"|“[^”\n]{1,80}”|'[^'\n]{1,80}'"
_VALUE = rf"{_NOT_PLACEHOLDER}(?:{_QUOTED}|[^\s,;\"<>]+)"
_PHRASE_VALUE = rf"{_NOT_PLACEHOLDER}[^.;\n\"<>]{{3,200}}"

# Up to two other words between a label and its verb ("mật khẩu wifi là …", "Passwort vom
# Router ist …"): then only a value that looks like a code is taken ("the password manager
# is Bitwarden" stays).
_FILLER = r"(?:\s+[^\s:=,;.!?\"]{2,15}){1,2}?"
_LABELLED = re.compile(
    rf"(?<![\w-])(?P<label>{_LABEL})(?P<qual>{_QUALIFIER}|{_POSSESSIVE}|(?P<filler>{_FILLER}))?"
    rf"(?P<sep>{_STRONG_SEP}|{_WORD_SEP})(?P<value>{_VALUE})",
    re.IGNORECASE,
)
_BARE = re.compile(rf"(?<![\w-])(?P<label>{_LABEL})(?P<sep>\s+)(?P<value>{_VALUE})", re.IGNORECASE)
_PHRASE = re.compile(
    rf"(?<![\w-])(?P<label>{_PHRASE_LABELS}){_QUALIFIER}?(?P<sep>{_STRONG_SEP}|{_WORD_SEP})"
    rf"(?P<value>{_PHRASE_VALUE})",
    re.IGNORECASE,
)
# No spaces in Japanese, Chinese or Korean: the label, a particle, then a Latin-script value.
_CJK = re.compile(
    r"(パスワード|暗証番号|暗号|密码|密碼|口令|비밀번호|암호|รหัสผ่าน|รหัส)"
    r"(?:\s*(?:の|は|が|是|为|為|:|\uff1a|는|은|=|คือ|ของฉัน))*\s*"
    r"([A-Za-z0-9!@#$%^&*._+\-]{3,})"
)

# Words that follow "password is" without being one ("the password is case-sensitive").
_ORDINARY = frozenset(
    """the a an my your his her our their its this that it what which something nothing
    not too very so still now also just set same different changed required needed needs
    expired strong weak long short secure safe correct wrong written stored saved somewhere
    in on at for with to of easy hard simple complicated private secret unknown empty blank
    missing new old case-sensitive there here only always never probably written down
    reset forgotten lost broken invalid incorrect valid working ready on, off
    el la le les un une der die das ein eine il lo o y et und e ist est es""".split()
)
_TRAILING = ".!?)]}»”\u2019"


def _looks_like_code(value: str) -> bool:
    """True for a value that is not an ordinary word: digits, mixed case inside, symbols."""
    core = value.strip(_TRAILING)
    if any(c.isdigit() for c in core):
        return True
    if len(core) >= 6 and any(c.isupper() for c in core[1:]) and any(c.islower() for c in core):
        return True
    return len(core) >= 4 and any(not c.isalnum() and c not in "'\u2019-" for c in core)


# "the passcode is 6 digits long", "PIN must be 4 characters": a length, not the secret
_UNIT_AFTER = re.compile(
    r"^[-\s]*(?:digits?|characters?|chars?|letters?|numbers?|symbols?|long|stellen|"
    r"ziffern|zeichen|chiffres|caractères|caracteres|dígitos|digitos|cifre|caratteri|cijfers|"
    r"tekens|znaków|znakow|cyfr|цифр\w*|символ\w*|karakter|haneli|chữ số|ký tự|अंक|أرقام|"
    r"桁|位|자리)\b",
    re.IGNORECASE,
)
# English word forms that follow "is"/"was" and describe the secret ("was revoked")
_DESCRIPTIVE = re.compile(r"^[a-z]{3,}(?:ed|ing|ly|able|ible)$")


def _kind(match: re.Match[str]) -> str:
    for group, kind in _KIND_OF_GROUP.items():
        if match.group(group):
            return kind
    return "secret"


_GENERIC_CODES = frozenset({"code", "código", "codigo", "codice"})
_ROMANCE_QUALIFIER = re.compile(r"^\s*(?:de|del|della|di|da|do|d['\u2019])", re.IGNORECASE)


def _split_value(value: str) -> tuple[str, str]:
    """(the secret, punctuation after it that belongs to the sentence)."""
    if value[:1] in "\"“'":
        return value, ""
    core = value.rstrip(_TRAILING)
    if not core:
        return value, ""
    return core, value[len(core) :]


def _labelled(match: re.Match[str], *, bare: bool) -> str:
    """The match with its value replaced, or unchanged when the value is not a secret."""
    text = match.group(0)
    value = match.group("value")
    secret, after = _split_value(value)
    kind = _kind(match)
    label = match.group("label").casefold()
    qual = match.groupdict().get("qual") or ""
    sep = match.group("sep")
    strong = bool(re.fullmatch(_STRONG_SEP, sep)) and not sep.isspace()
    quoted = secret[:1] in "\"“'"
    if label in _GENERIC_CODES and not _ROMANCE_QUALIFIER.match(qual):
        return text  # "dress code", "postal code": only "code de la porte", "código de…"
    if kind == "password" and match.group("pass") and not strong:
        return text
    if kind in ("PIN", "code", "number") and not any(c.isdigit() for c in secret):
        return text
    if _UNIT_AFTER.match(match.string[match.end() :]) or "digit" in secret.casefold():
        return text
    word_sep = not strong and not quoted
    needs_code = (
        bare
        or bool(match.groupdict().get("filler"))
        or sep.strip().casefold() in ("to", "set to", "changed to")
        # keys, tokens and codes are never ordinary words: "my API key was revoked"
        or (word_sep and kind in ("key", "code", "PIN", "number"))
    )
    if needs_code:
        if not (quoted or _looks_like_code(secret)):
            return text
    elif word_sep:
        plain = secret.casefold().strip(_TRAILING)
        if plain in _ORDINARY or _DESCRIPTIVE.match(plain):
            return text
    head = text[: len(text) - len(value)]
    return f"{head}{placeholder(kind)}{after}"


def _phrase(match: re.Match[str]) -> str:
    value = match.group("value").rstrip()
    text = match.group(0)
    if len(value.split()) < 3:
        return text
    return text[: len(text) - len(match.group("value"))] + placeholder("passphrase")


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def _whole(kind: str) -> Callable[[re.Match[str]], str]:
    """A replacement of the whole match by the placeholder of `kind`."""
    return lambda _: placeholder(kind)


_RULES: tuple[_Rule, ...] = (
    (_PRIVATE_KEY, _whole("private key")),
    (_URL_PASSWORD, lambda m: f"{m.group(1)}{placeholder('password')}{m.group(3)}"),
    (_SLACK_WEBHOOK, lambda m: f"{m.group(1)}{placeholder('key')}"),
    (_KEYS, _whole("key")),
    (_BEARER, lambda m: f"{m.group(1)}{m.group(2)}{placeholder('token')}"),
    (_PHRASE, _phrase),
    (_LABELLED, lambda m: _labelled(m, bare=False)),
    (_BARE, lambda m: _labelled(m, bare=True)),
    (_CJK, lambda m: m.group(0)[: m.start(2) - m.start(0)] + placeholder("password")),
    (_CODE_FIRST, _whole("code")),
    (_IBAN, _iban),
    (_CARD, _card),
    (_SSN, _whole("number")),
    (_BASE64_40, _base64_40),
)


_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=-]*")


def _hits(text: str) -> list[Hit]:
    """Every span the library's detectors and the formats above find, overlaps merged."""
    found = [
        *secret_library.private_key_hits(text),
        *secret_library.provider_hits(text),
        *secret_formats.format_hits(text),
        *(Hit(start, end, "passphrase") for start, end in seed_phrases.seed_phrase_spans(text)),
        *secret_library.entropy_hits(text),
    ]
    offset = 0
    for line in text.splitlines(keepends=True):
        found += [
            Hit(h.start + offset, h.end + offset, h.kind)
            for h in secret_library.assignment_hits(line)
        ]
        offset += len(line)
    # a key never ends inside a token (the library's JWT pattern stops before the signature)
    found = [
        Hit(h.start, _TOKEN_TAIL.match(text, h.end).end(), h.kind) if h.kind == "key" else h  # type: ignore[union-attr]
        for h in found
    ]
    merged: list[Hit] = []
    for hit in sorted(found, key=lambda h: (h.start, -h.end)):
        if merged and hit.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Hit(last.start, max(last.end, hit.end), last.kind)
        else:
            merged.append(hit)
    return merged


def _replace_hits(text: str) -> str:
    taken = [m.span() for m in PLACEHOLDER.finditer(text)]
    hits = [
        h for h in _hits(text) if not any(h.start < end and start < h.end for start, end in taken)
    ]
    for hit in reversed(hits):
        text = text[: hit.start] + placeholder(hit.kind) + text[hit.end :]
    return text


# A label left without its value at the end of a message or line ("my password is", "PIN:",
# "mot de passe :", "パスワードは"): the value is the start of what follows.
_DANGLING = re.compile(
    rf"(?<![\w-])(?P<label>{_LABEL}|パスワード|暗証番号|密码|密碼|비밀번호|รหัสผ่าน)"
    rf"(?:{_QUALIFIER}|{_POSSESSIVE})?"
    rf"(?:\s*(?:[:=\uff1a]|=>|->)|\s+(?:{_COPULA})|\s+[—–-]|\s*(?:は|是|为|는|은|คือ))?"
    r"[\s.…]*$",
    re.IGNORECASE,
)
# What starts the next line of a prompt or transcript before the user's words ("user: ",
# "[m3] user: ", "- ").
_LINE_PREFIX = re.compile(
    r"^\s*(?:(?!\[redacted)\[[^\]\n]{1,20}\]\s*)?(?:(?:user|assistant|human)\s*:\s*)?(?:[-*]\s+)?"
)
_FIRST_TOKEN = re.compile(rf"{_NOT_PLACEHOLDER}(?:{_QUOTED}|[^\s,;\"<>]+)")


# Short replies that follow a question about a password rather than give one.
_REPLIES = frozenset(
    """ok okay yes no yeah yep nope sure thanks thank wait hmm sorry what why how right
    done oui non ja nein nee sí si não nao да нет はい いいえ 好的 네 아니요""".split()
)


def _dangles(text: str) -> bool:
    match = _DANGLING.search(text.rstrip())
    if match is None:
        return False
    label = match.group("label").casefold()
    # "pass" and the generic "code" are ordinary words alone ("a boarding pass:")
    return label not in ("pass", *_GENERIC_CODES)


def _continue_value(text: str) -> str:
    """`text` with its first token replaced when it reads as the value of a label that
    ended the text before it (a secret split over two messages or lines).
    """
    prefix = _LINE_PREFIX.match(text)
    head = prefix.end() if prefix else 0
    token = _FIRST_TOKEN.match(text, head)
    if token is None:
        return text
    secret, after = _split_value(token.group(0))
    rest = text[token.end() :].strip()
    plain = secret.casefold()
    if _UNIT_AFTER.match(text[token.end() :]):
        return text
    single = not rest or rest[:1] in ".!?"
    if plain.strip(_TRAILING) in _ORDINARY | _REPLIES or _DESCRIPTIVE.match(plain):
        return text
    if not (single or _looks_like_code(secret) or secret[:1] in "\"“'"):
        return text
    return text[:head] + placeholder("password") + after + text[token.end() :]


def _split_lines(text: str) -> str:
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if _dangles(lines[i - 1]) and lines[i].strip():
            lines[i] = _continue_value(lines[i])
    return "\n".join(lines)


@lru_cache(maxsize=8192)
def _redact_alone(text: str) -> str:
    """The layers on one text. Cached: the same memories are rendered into every injected
    block, and one pass of all the detectors costs about a millisecond per 100 characters.
    """
    text = _replace_hits(text)
    for pattern, replace in _RULES:
        text = pattern.sub(replace, text)
    return text


def redact(text: str, *, previous: str | None = None) -> str:
    """`text` with every credential replaced by a placeholder naming its kind.

    `previous` is the message that came before `text` in the same conversation (the user's
    last message of a batch or history): when it ends with a label and no value ("my
    password is"), the start of `text` is taken for the value.

    Idempotent: placeholders are never redacted again, so texts may pass through this
    function at every layer. Pure; no I/O.
    """
    if not text:
        return text
    text = _redact_alone(text)
    if previous and _dangles(previous):
        text = _continue_value(text)
    if "\n" in text:
        text = _split_lines(text)
    return text


def redact_conversation(messages: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(role, text) messages, each redacted with the user's message before it as
    `previous`, so a secret split over two user messages is caught.
    """
    out: list[tuple[str, str]] = []
    previous: str | None = None
    for role, text in messages:
        out.append((role, redact(text, previous=previous)))
        if role == "user":
            previous = text
    return out


def mostly_redacted(text: str, *, min_chars: int = 12) -> bool:
    """True when fewer than `min_chars` characters are left once placeholders are removed:
    a "fact" that would only say that something was withheld.
    """
    if not PLACEHOLDER.search(text):
        return False
    return len(PLACEHOLDER.sub("", text).strip(" .,:;-")) < min_chars
