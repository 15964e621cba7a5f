"""The detectors of detect-secrets (Yelp, PyPI `detect-secrets`), applied to chat text.

detect-secrets scans source files; its plugins are regular expressions per provider (AWS,
Azure storage, GitHub, GitLab, Slack, Stripe, Twilio, SendGrid, Square, Discord, Telegram,
npm, PyPI, JWT, Mailchimp, IBM, SoftLayer, Cloudant, Artifactory, OpenAI), a keyword
detector for assignments (`password: …`, `DB_PASSWORD=…`), private key headers and Shannon
entropy over base64 and hex alphabets, plus heuristic filters against false positives. This
module runs the plugins' own compiled patterns over the text and uses their entropy and
filters, so the provider formats stay the library's (updated with it); what a chat needs on
top — a value's end in prose, key blocks as a whole — is decided here.

The library's settings singleton (baselines, verification over the network) is never used:
the plugins are instantiated once and only their patterns and pure functions are called, so
scanning is thread-safe and does no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector


@dataclass(frozen=True, slots=True)
class Hit:
    """A secret found in a text: its character span and what it is."""

    start: int
    end: int
    kind: str  #: the placeholder's kind ("key", "password", "private key")


# Every regex plugin of detect-secrets 1.5 but IPPublicDetector: a public IP address is no
# credential, and chat users name servers by address.
_PROVIDERS: tuple[RegexBasedDetector, ...] = (
    ArtifactoryDetector(),
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    CloudantDetector(),
    DiscordBotTokenDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    IbmCloudIamDetector(),
    IbmCosHmacDetector(),
    JwtTokenDetector(),
    MailchimpDetector(),
    NpmDetector(),
    OpenAIDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SoftlayerDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
    TelegramBotTokenDetector(),
    TwilioKeyDetector(),
)
_BASIC_AUTH = BasicAuthDetector()
_PRIVATE_KEY = PrivateKeyDetector()
_BASE64 = Base64HighEntropyString()  # limit 4.5 bits per character, the library's default
_HEX = HexHighEntropyString()  # limit 3.0

# Assignments as in configuration files (`key: value`, `KEY=value`): the library's choice
# for YAML, INI, properties and .env files, the closest to what users paste.
_ASSIGNMENTS = keyword.CONFIG_DENYLIST_REGEX_TO_GROUP

# PEM and OpenSSH blocks end with their END line; PuTTY files with the Private-MAC line.
_BLOCK_END = re.compile(
    r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|---- END SSH2 ENCRYPTED PRIVATE KEY ----"
    r"|Private-MAC: *[0-9a-fA-F]+"
)
# Substrings every keyword of the library's DENYLIST contains (api_key, db_pass, pwd, secret,
# contraseña, …)
_ASSIGNMENT_WORDS = ("key", "pass", "pwd", "secret", "contrase")
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d")
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/=_-])")
_QUOTES = "\"'` "


def _value_span(match: re.Match[str], group: int | None = None) -> tuple[int, int]:
    """The span of the secret in a plugin's match: the group it names, else the last
    non-empty group, else the whole match without the delimiters some patterns take in.
    """
    if group is not None:
        return match.span(group)
    for index in range(len(match.groups()), 0, -1):
        if match.group(index):
            return match.span(index)
    start, end = match.span()
    text = match.group(0)
    start += len(text) - len(text.lstrip(_QUOTES + "=:"))
    end -= len(text) - len(text.rstrip(_QUOTES))
    return start, end


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


# Literals without which a plugin's patterns cannot match: those patterns backtrack over the
# rest of the text at every prefix ("sk-sk-sk-…" costs seconds), so they only run when the
# literal is there. JWTs are read token by token for the same reason.
_REQUIRED = {OpenAIDetector: "T3BlbkFJ", NpmDetector: "_authToken"}
_NON_BLANK = re.compile(r"\S+")


def _plugin_matches(plugin: RegexBasedDetector, text: str) -> Iterator[re.Match[str]]:
    required = _REQUIRED.get(type(plugin))
    if required is not None and required not in text:
        return
    if isinstance(plugin, JwtTokenDetector):
        for token in _NON_BLANK.finditer(text):
            if "eyJ" in token.group(0):
                for pattern in plugin.denylist:
                    yield from pattern.finditer(text, token.start(), token.end())
        return
    for pattern in plugin.denylist:
        yield from pattern.finditer(text)


def provider_hits(text: str) -> Iterator[Hit]:
    """Provider keys and tokens by the library's patterns, passwords in URLs."""
    for plugin in _PROVIDERS:
        for match in _plugin_matches(plugin, text):
            start, end = _value_span(match)
            value = text[start:end]
            # Artifactory's "AP…" password pattern also fits capitalised words
            # ("APEXLEGENDS"); every real token of the family has digits.
            if not value or heuristic.is_sequential_string(value) or not _has_digit(value):
                continue
            yield Hit(start, end, "key")
    for pattern in _BASIC_AUTH.denylist:
        for match in pattern.finditer(text):
            start, end = match.span(1)
            if not heuristic.is_templated_secret(text[start:end]):
                yield Hit(start, end, "password")


def private_key_hits(text: str) -> Iterator[Hit]:
    """Private key blocks (PEM, OpenSSH, PGP, SSH2, PuTTY), from their header to their end
    line, or to the end of the text when the user pasted only part of one.
    """
    starts = [m.start() for p in _PRIVATE_KEY.denylist for m in p.finditer(text)]
    starts += [m.start() for m in _PUTTY.finditer(text)]
    covered = -1
    for start in sorted(starts):
        if start < covered:
            continue
        # the header's dashes belong to the block
        begin = start
        while begin > 0 and text[begin - 1] in "- ":
            begin -= 1
        end_match = _BLOCK_END.search(text, start)
        end = end_match.end() if end_match else len(text)
        covered = end
        yield Hit(begin, end, "private key")


def assignment_hits(line: str) -> Iterator[Hit]:
    """Values of secret-named assignments in one line (`password: x`, `api_key = "x"`,
    `DB_PASSWORD=x`), by the library's keyword detector. In prose the library's value runs
    to the end of the line, so the value is cut at the first blank unless it is quoted.

    The library's patterns backtrack over the rest of the line at every keyword (quadratic
    in a long line of keywords), so a long line is read in overlapping windows of
    `_WINDOW` characters: an assignment is short, and the cost stays linear.
    """
    folded = line.casefold()
    if not any(word in folded for word in _ASSIGNMENT_WORDS):
        return  # none of the detector's keywords: skip its backtracking patterns
    if len(line) <= _WINDOW:
        yield from _assignments(line, 0, line)
        return
    for offset in range(0, len(line) - _WINDOW // 2, _WINDOW // 2):
        yield from _assignments(line[offset : offset + _WINDOW], offset, line)


_WINDOW = 512


def _assignments(window: str, offset: int, line: str) -> Iterator[Hit]:
    for pattern, group in _ASSIGNMENTS.items():
        if pattern is keyword.FOLLOWED_BY_QUOTES_AND_SEMICOLON_REGEX and ";" not in window:
            continue
        position = 0
        # the library's value runs to the end of the line: search again after the cut value,
        # so that a second assignment on the line is found too
        while (match := pattern.search(window, position)) is not None:
            start, end = _value_span(match, group)
            if start < 0:
                position = match.end()
                continue
            opening = window[start - 1] if start > 0 else ""
            if opening not in "\"'`":
                blank = re.search(r"\s", window[start:end])
                if blank:
                    end = start + blank.start()
                elif end == len(window):  # the window cut the value: it goes on in the line
                    more = re.compile(r"\S*").match(line, offset + end)
                    end = (more.end() if more else offset + end) - offset
                while end > start and line[offset + end - 1] in ".,;:!?)]}":
                    end -= 1
            position = max(match.start() + 1, min(end, len(window)))
            value = line[offset + start : offset + end]
            if (
                not value
                or heuristic.is_templated_secret(value)
                or heuristic.is_prefixed_with_dollar_sign(value)
                or heuristic.is_not_alphanumeric_string(value)
                or heuristic.is_indirect_reference(window[match.start() : end + 1])
            ):
                continue
            kind = "password" if "pass" in match.group(0).lower() else "secret"
            yield Hit(offset + start, offset + end, kind)


# Public wallet addresses (Base58Check P2PKH/P2SH, bech32) are meant to be shared.
_ADDRESS = re.compile(r"[13][1-9A-HJ-NP-Za-km-z]{25,34}|bc1[02-9ac-hj-np-z]{11,87}")
_PATH_WORD = re.compile(r"^[a-z]{3,}$")


def entropy_hits(text: str, *, min_chars: int = 32) -> Iterator[Hit]:
    """Long runs of base64 or hex characters random enough to be keys (the library's Shannon
    entropy limits), minus UUIDs, sequences, wallet addresses and URL paths (a shared
    document's id in its link is an address, not a credential).
    """
    for match in _TOKEN.finditer(text):
        value = match.group(0)
        if len(value) < min_chars or heuristic.is_potential_uuid(value):
            continue
        if _ADDRESS.fullmatch(value) or text[match.start() - 1 : match.start()] in (".", "/"):
            continue
        if "/" in value and any(_PATH_WORD.match(part) for part in value.split("/")):
            continue
        if heuristic.is_sequential_string(value):
            continue
        hexadecimal = all(c in "0123456789abcdefABCDEF" for c in value)
        if hexadecimal:
            # hashes (git, SHA-256) are hex too and are talked about: only with a label
            continue
        mixed = (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and (_has_digit(value) or "/" in value or "+" in value)
        )
        if mixed and _BASE64.calculate_shannon_entropy(value) > _BASE64.entropy_limit:
            yield Hit(match.start(), match.end(), "key")


def hex_entropy(value: str) -> float:
    """Shannon entropy of `value` over the hex alphabet (bits per character; the library's
    digits-only correction included).
    """
    return float(_HEX.calculate_shannon_entropy(value))


def base64_entropy(value: str) -> float:
    """Shannon entropy of `value` over the base64 alphabets (bits per character)."""
    return float(_BASE64.calculate_shannon_entropy(value))
