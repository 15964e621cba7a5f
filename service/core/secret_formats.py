"""Credential formats that detect-secrets does not know and chat users paste: provider
tokens by their documented prefixes, passwords in command lines, connection strings and
Wi-Fi QR codes, signed URLs, TOTP seeds, wallet keys (DESIGN §5.5).

Each rule is (pattern, kind, group): the text of `group` is the secret. The prefixes and
lengths are those the providers publish (GitLab's token prefix table, Slack's token types,
Shopify's access token changelog of 2020-04, Azure's SAS query parameters, Mailgun's
`key-` API keys, …); lengths are lower bounds so that a longer token of a new release is
still caught.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from service.core.secret_library import Hit, base64_entropy

_B = r"(?<![A-Za-z0-9_])"  # a token starts at a word edge (not inside another token)
_E = r"(?![A-Za-z0-9_])"

# --- provider tokens (whole match is the secret) -------------------------------------------
_PROVIDER_TOKENS = (
    r"xapp-\d-[A-Z0-9]{6,}-\d{6,}-[a-f0-9]{20,}",  # Slack app-level
    r"xox[a-z]-[A-Za-z0-9-]{10,}",  # Slack bot, user, config, refresh tokens
    r"key-[0-9a-f]{32}",  # Mailgun private API key
    r"shp(?:at|ca|pa|ss|ua)_[a-fA-F0-9]{32}",  # Shopify
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas|rtr|ffct|wt)-[A-Za-z0-9_.-]{20,}",  # GitLab
    r"GR1348941[A-Za-z0-9_-]{20,}",  # GitLab runner registration token (legacy)
    r"ATATT3[A-Za-z0-9_=-]{40,}",  # Atlassian API token
    r"ATBB[A-Za-z0-9_=.-]{28,}",  # Bitbucket app password
    r"dapi[a-f0-9]{32}(?:-\d)?",  # Databricks
    r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}",  # Doppler
    r"sl\.[A-Za-z0-9_-]{120,}",  # Dropbox short-lived
    r"lin_(?:api|oauth)_[A-Za-z0-9]{40}",  # Linear
    r"(?:secret|ntn)_[A-Za-z0-9]{40,}",  # Notion integrations
    r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",  # Postman
    r"pul-[a-f0-9]{40}",  # Pulumi
    r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",  # Terraform Cloud
    r"hv[sbr]\.[A-Za-z0-9_-]{24,}",  # HashiCorp Vault
    r"gl(?:sa|c)_[A-Za-z0-9_+/=]{32,}",  # Grafana service account, Grafana Cloud
    r"NR(?:AK|AA|II|JS|SP)-[A-Z0-9]{19,}",  # New Relic
    r"sntr[ysu]_[A-Za-z0-9+/=_-]{40,}",  # Sentry
    r"fig[dhu]_[A-Za-z0-9_-]{38,}",  # Figma
    r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",  # Airtable personal access token
    r"[sp]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",  # Mapbox
    r"AGE-SECRET-KEY-1[0-9A-Z]{58}",  # age encryption
    r"sbp_[a-f0-9]{40}",  # Supabase
    r"fo1_[A-Za-z0-9_-]{39,}",  # Fly.io
    r"tskey-(?:auth|api|client|webhook|scim)-[A-Za-z0-9]+-[A-Za-z0-9]{20,}",  # Tailscale
    r"pplx-[A-Za-z0-9]{40,}",  # Perplexity
    r"rubygems_[a-f0-9]{48}",  # RubyGems
    r"oy2[a-z0-9]{43}",  # NuGet
    r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",  # Docker Hub
    r"shippo_(?:live|test)_[a-f0-9]{40}",  # Shippo
    r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",  # Braintree
    r"FLWSECK(?:_TEST)?-[a-f0-9]{32}-X",  # Flutterwave
    r"rzp_(?:live|test)_[A-Za-z0-9]{14,}",  # Razorpay
    r"EAAA[A-Za-z0-9_-]{60,}",  # Square access token
    r"sq0(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}",  # Square
    r"do[opr]_v1_[a-f0-9]{64}",  # DigitalOcean
    r"HRKU-[A-Za-z0-9_-]{36,}",  # Heroku
    r"LTAI[A-Za-z0-9]{12,20}",  # Alibaba Cloud access key id
    r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",  # Brevo (Sendinblue)
    r"CFPAT-[A-Za-z0-9_-]{43}",  # Contentful
    r"pnu_[A-Za-z0-9]{36}",  # Prefect
    r"bkua_[a-f0-9]{40}",  # Buildkite
    r"nfp_[A-Za-z0-9]{36}",  # Netlify
    r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}",  # PlanetScale
    r"duffel_(?:test|live)_[A-Za-z0-9_-]{43}",  # Duffel
    r"EZ[AT]K[a-zA-Z0-9]{54}",  # EasyPost
    r"aio_[A-Za-z0-9]{28}",  # Adafruit IO
    r"rdme_[a-z0-9]{70}",  # ReadMe
    r"tfp_[A-Za-z0-9_-]{40,}",  # Typeform
    r"SCW[A-Z0-9]{17}",  # Scaleway access key
    r"CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}",  # CircleCI
    r"y0_[A-Za-z0-9_-]{50,}",  # Yandex OAuth
    r"oauth:[a-z0-9]{30}",  # Twitch chat
    r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{20,}",  # Anthropic
    r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",  # OpenAI project and service keys
    r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}",  # Microsoft Entra client secret
    r"AC[a-f0-9]{32}|SK[a-f0-9]{32}",  # Twilio account SID, API key SID
    r"[a-f0-9]{32}-us\d{1,2}",  # Mailchimp
)
_PROVIDER = re.compile(_B + "(?:" + "|".join(_PROVIDER_TOKENS) + ")" + _E)

# Vendor tokens of an unknown provider: a short lower-case prefix ("abc_", "abc_live_")
# before a long random run with letters and digits (the shape GitHub's, Stripe's and most
# recent formats share).
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_./-])(?P<prefix>[a-z][a-z0-9]{1,11}(?:[_-][a-z0-9]{1,11}){0,2}[_-])"
    r"(?P<body>(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{24,})(?![A-Za-z0-9_])"
)
_DIGEST_PREFIXES = frozenset({"sha1-", "sha256-", "sha384-", "sha512-", "md5-", "sha-"})

# --- signed URLs and query parameters (group 2 is the secret) -------------------------------
_QUERY_SECRET = re.compile(
    r"([?&;](?:sig|signature|X-Amz-Signature|X-Amz-Security-Token|X-Goog-Signature|"
    r"access_token|refresh_token|id_token|api_key|apikey|api-key|key|token|secret|"
    r"client_secret|password|passwd|pwd|auth|code_verifier|private_token|sas)=)"
    r"([^&\s#\"'<>]{6,})",
    re.IGNORECASE,
)
_OTPAUTH = re.compile(
    r"(otpauth(?:-migration)?://[^\s?]{0,200}\?(?:[^\s]{0,400}?[&?])?)(secret|data)=([^&\s]+)"
)

# --- Wi-Fi QR codes: WIFI:T:WPA;S:name;P:password;; (the P field, backslash escapes) -------
_WIFI = re.compile(r"(WIFI:(?:[^\n]{0,160}?;)?P:)((?:\\.|[^;\\\n])+)", re.IGNORECASE)

# --- command lines (group 2 is the secret) -------------------------------------------------
_VALUE = r"(?:'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"
_COMMAND_SECRETS = (
    # long options naming a secret: --password x, --password=x, --token x
    rf"((?<![\w-])--(?:[a-z]+-)*(?:password|passwd|pass|passphrase|token|api-?key|secret|"
    rf"client-secret|storepass|keypass|auth-token|access-token)(?:[= ]+))({_VALUE})",
    # sshpass -p x; redis-cli -a x; ldapsearch -w x; sqlcmd -P x; docker login -p x
    rf"(\bsshpass\s+(?:-\w\s+)*-p\s*)({_VALUE})",
    rf"(\bredis-cli\b[^\n]{{0,160}}?\s-a\s+)({_VALUE})",
    rf"(\bldap(?:search|add|modify|delete|passwd|whoami)\b[^\n]{{0,160}}?\s-w\s+)({_VALUE})",
    rf"(\b(?:sqlcmd|bcp|isql)\b[^\n]{{0,160}}?\s-P\s*)({_VALUE})",
    rf"(\b(?:docker|podman|helm|nerdctl)\s+(?:registry\s+)?login\b[^\n]{{0,160}}?\s-p\s+)({_VALUE})",
    # mysql -pSECRET (attached), mysql -p SECRET is a database name: only the attached form
    rf"(\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|mongo|mongosh|mongodump)\b"
    rf"[^\n]{{0,160}}?\s-p)((?!\s){_VALUE})",
    rf"(\b(?:mongo|mongosh|mongodump|mongorestore)\b[^\n]{{0,160}}?\s-p\s+)({_VALUE})",
    # 7z -pSECRET, unrar -pSECRET, zip -P SECRET, openssl -pass pass:SECRET
    r"(\b(?:7z|7za|unrar|rar)\b[^\n]{0,160}?\s-p)((?!\s)[^\s'\"]+)",
    rf"(\bzip\b[^\n]{{0,160}}?\s-P\s+)({_VALUE})",
    rf"((?:-pass(?:in|out)?|-passwd)\s+(?:pass|env):)({_VALUE})",
    # curl -u user:pass, --user user:pass, wget --http-password covered above
    r"((?:\bcurl\b[^\n]{0,160}?\s)(?:-u|--user|--proxy-user)\s+['\"]?[^\s:'\"]+:)([^\s'\"@]+)",
    # smbclient -U user%pass, rdesktop/xfreerdp /p:pass, net use … /user:x pass
    r"(\bsmbclient\b[^\n]{0,160}?-U\s+['\"]?[^\s%'\"]+%)([^\s'\"]+)",
    rf"(\b(?:xfreerdp|wlfreerdp|sdl-freerdp)\b[^\n]{{0,160}}?\s/p:)({_VALUE})",
    rf"(\brdesktop\b[^\n]{{0,160}}?\s-p\s+)({_VALUE})",
    rf"(\bnet\s+use\s+\S+\s+)({_VALUE})(?=\s+/user:)",
    rf"(\bhtpasswd\s+(?:-\w+\s+)*-b\w*\s+\S+\s+\S+\s+)({_VALUE})",
    # ssh-keygen -N pass, openssl … -k pass
    rf"(\bssh-keygen\b[^\n]{{0,160}}?\s-N\s+)({_VALUE})",
    # env assignment before a command: PGPASSWORD=x psql, MYSQL_PWD=x mysql
    rf"((?<![\w$])[A-Z0-9_]{{0,60}}?(?:PASSWORD|PASSWD|PWD|PASS|PASSPHRASE|SECRET|TOKEN|APIKEY|"
    rf"API_KEY|ACCESS_KEY|PRIVATE_KEY|SECRET_KEY|AUTH|CREDENTIALS?|DSN)(?:_[A-Z0-9]{{1,20}}){{0,3}}"
    rf"\s*=\s*)({_VALUE})",
)
_COMMANDS = tuple(re.compile(p) for p in _COMMAND_SECRETS)
# An env name whose label is followed by one of these names something else (`SECRET_PATH`).
_NOT_SECRET_SUFFIX = re.compile(
    r"_(?:PATH|FILE|DIR|NAME|ID|URL|URI|HOST|PORT|USER|USERNAME|LENGTH|LEN|SIZE|TTL|EXPIRY|"
    r"EXPIRES|EXPIRE|TYPE|ALGORITHM|ALG|VERSION|ENABLED|REQUIRED|MIN|MAX|POLICY|HEADER|"
    r"PARAM|FIELD|REGION|MODE|ROTATION|COUNT|LIMIT|TIMEOUT)\s*=\s*$"
)
_EMPTYISH = frozenset({"", "''", '""', "changeme", "xxx", "...", "…", "<secret>", "none", "null"})

# --- connection strings (ADO.NET, JDBC, ODBC): Password=…; (group 2) -----------------------
_KEY_VALUE = re.compile(
    r"((?<![\w-])(?:Password|Pwd|PWD|AccountKey|SharedAccessKey|SharedAccessSignature|"
    r"AccessKey|ClientSecret|Client Secret|Token|SAS)\s*=\s*)([^;\s\"'&]+)",
)

# --- TOTP seeds and recovery codes ----------------------------------------------------------
# Authenticator "setup keys": base32 in groups of four ("jbsw y3dp ehpk 3pxp …"), at least 16
# characters and two digits 2–7 (English four-letter words have none).
_BASE32_GROUPS = re.compile(
    r"(?<![A-Za-z0-9])(?=(?:[A-Za-z2-7]{4}\s){3,}[A-Za-z2-7]{4}(?![A-Za-z0-9]))"
    r"(?=(?:[A-Za-z\s]*[2-7]){2})(?:[A-Za-z2-7]{4}\s){3,}[A-Za-z2-7]{4}(?![A-Za-z0-9])"
)

# --- wallet keys ------------------------------------------------------------------------------
# Bitcoin WIF private keys (51 or 52 base58 characters, "5", "K" or "L" first); addresses are
# 26–35 characters and public, so they are left alone.
_WIF = re.compile(r"(?<![A-Za-z0-9])[5KL][1-9A-HJ-NP-Za-km-z]{50,51}(?![A-Za-z0-9])")
# Extended private keys (BIP-32): xprv, yprv, zprv, tprv
_XPRV = re.compile(r"(?<![A-Za-z0-9])[xyzt]prv[1-9A-HJ-NP-Za-km-z]{100,112}(?![A-Za-z0-9])")


def _group_hits(pattern: re.Pattern[str], text: str, group: int, kind: str) -> Iterator[Hit]:
    for match in pattern.finditer(text):
        start, end = match.span(group)
        if start < end:
            yield Hit(start, end, kind)


def _unquoted(text: str, start: int, end: int) -> tuple[int, int]:
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "'\"":
        return start + 1, end - 1
    return start, end


def format_hits(text: str) -> Iterator[Hit]:
    """Every secret of the formats above in `text`."""
    for match in _PROVIDER.finditer(text):
        yield Hit(match.start(), match.end(), "key")
    yield from _prefixed_hits(text)
    yield from _group_hits(_QUERY_SECRET, text, 2, "key")
    yield from _group_hits(_OTPAUTH, text, 3, "key")
    yield from _group_hits(_WIFI, text, 2, "password")
    yield from _group_hits(_KEY_VALUE, text, 2, "password")
    yield from _command_hits(text)
    for match in _BASE32_GROUPS.finditer(text):
        yield Hit(match.start(), match.end(), "key")
    yield from _wallet_hits(text)


def _prefixed_hits(text: str) -> Iterator[Hit]:
    """Prefixed tokens whose body looks random (digest prefixes such as `sha256-` excluded)."""
    for match in _PREFIXED.finditer(text):
        if match.group("prefix").casefold() in _DIGEST_PREFIXES:
            continue
        if base64_entropy(match.group("body")) >= 3.5:
            yield Hit(match.start(), match.end(), "key")


def _command_hits(text: str) -> Iterator[Hit]:
    """Passwords given to commands, unquoted; placeholders and variables are not secrets."""
    for pattern in _COMMANDS:
        for match in pattern.finditer(text):
            if _NOT_SECRET_SUFFIX.search(match.group(1)):
                continue
            start, end = _unquoted(text, *match.span(2))
            value = text[start:end].casefold()
            if value in _EMPTYISH or value.startswith(("$", "%", "{{", "<")):
                continue
            yield Hit(start, end, "password")


def _wallet_hits(text: str) -> Iterator[Hit]:
    """WIF and extended private keys random enough not to be a word run."""
    for pattern in (_WIF, _XPRV):
        for match in pattern.finditer(text):
            if base64_entropy(match.group(0)) > 4.0:
                yield Hit(match.start(), match.end(), "private key")
