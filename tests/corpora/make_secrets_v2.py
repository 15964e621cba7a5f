# ruff: noqa: E501  (a table of formats and sentences: one entry a line reads best)
"""Writes tests/corpora/secrets_v2.json: secrets in the formats their issuers publish, in the
sentences chat users write them in, and look-alikes that must stay as they are.

    python tests/corpora/make_secrets_v2.py      # rewrites the JSON (seeded: same output)

Every token is random (seeded) in its provider's documented shape: the prefix and alphabet
and length of the reference named in SOURCES. Every case has a `split`: "tune" (the rules
were adjusted on these) or "report" (measured only). Each kind has several carrier
sentences; the tune and report halves use different ones (even and odd templates), so the
report half measures phrasings the rules were not tuned on.
"""

from __future__ import annotations

import base64
import json
import random
import string
import unicodedata
from collections.abc import Callable
from pathlib import Path

from mnemonic import Mnemonic

OUT = Path(__file__).with_name("secrets_v2.json")
R = random.Random(27)

LOWER, UPPER, DIGITS = string.ascii_lowercase, string.ascii_uppercase, string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B32 = UPPER + "234567"

# Public references of the formats (documentation pages of the issuers and of the standards).
SOURCES = {
    "aws_access_key_id": "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html",
    "aws_secret_access_key": "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html",
    "github_token": "https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/",
    "github_fine_grained": "https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/managing-your-personal-access-tokens",
    "gitlab_pat": "https://docs.gitlab.com/ee/security/tokens/#token-prefixes",
    "gitlab_runner": "https://docs.gitlab.com/ee/security/tokens/#token-prefixes",
    "slack_bot_token": "https://api.slack.com/authentication/token-types",
    "slack_app_token": "https://api.slack.com/authentication/token-types",
    "slack_webhook": "https://api.slack.com/messaging/webhooks",
    "stripe_key": "https://docs.stripe.com/keys",
    "openai_key": "https://platform.openai.com/docs/api-reference/authentication",
    "anthropic_key": "https://docs.anthropic.com/en/api/getting-started",
    "google_api_key": "https://cloud.google.com/docs/authentication/api-keys",
    "sendgrid_key": "https://www.twilio.com/docs/sendgrid/ui/account-and-settings/api-keys",
    "twilio_key": "https://www.twilio.com/docs/iam/api-keys",
    "mailgun_key": "https://documentation.mailgun.com/docs/mailgun/user-manual/get-started/",
    "shopify_token": "https://shopify.dev/changelog/length-of-the-shopify-access-token-is-increasing",
    "azure_sas": "https://learn.microsoft.com/en-us/rest/api/storageservices/service-sas-examples",
    "azure_storage_connection": "https://learn.microsoft.com/en-us/azure/storage/common/storage-configure-connection-string",
    "npm_token": "https://docs.npmjs.com/about-access-tokens",
    "pypi_token": "https://pypi.org/help/#apitoken",
    "huggingface_token": "https://huggingface.co/docs/hub/security-tokens",
    "telegram_bot_token": "https://core.telegram.org/bots/api#authorizing-your-bot",
    "discord_bot_token": "https://discord.com/developers/docs/reference#authentication",
    "jwt": "https://datatracker.ietf.org/doc/html/rfc7519",
    "digitalocean_token": "https://docs.digitalocean.com/reference/api/create-personal-access-token/",
    "databricks_token": "https://docs.databricks.com/en/dev-tools/auth/pat.html",
    "vault_token": "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes",
    "docker_hub_token": "https://docs.docker.com/security/for-developers/access-tokens/",
    "atlassian_token": "https://support.atlassian.com/atlassian-account/docs/manage-api-tokens-for-your-atlassian-account/",
    "pem_private_key": "https://datatracker.ietf.org/doc/html/rfc7468",
    "openssh_private_key": "https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.key",
    "putty_private_key": "https://the.earth.li/~sgtatham/putty/0.78/htmldoc/AppendixC.html",
    "bip39_seed_phrase": "https://github.com/bitcoin/bips/blob/master/bip-0039.mediawiki",
    "wif_private_key": "https://en.bitcoin.it/wiki/Wallet_import_format",
    "totp_seed": "https://github.com/google/google-authenticator/wiki/Key-Uri-Format",
    "recovery_codes": "https://docs.github.com/en/authentication/securing-your-account-with-two-factor-authentication-2fa/configuring-two-factor-authentication-recovery-methods",
    "card_number": "https://www.iso.org/standard/70484.html",
    "iban": "https://www.iso.org/standard/81090.html",
    "wifi_qr": "https://github.com/zxing/zxing/wiki/Barcode-Contents#wi-fi-network-config-android-ios-11",
    "connection_string": "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-URIS",
    "command_line": "https://linux.die.net/man/1/sshpass",
    "env_file": "https://hexdocs.pm/dotenvy/dotenv-file-format.html",
    "basic_auth_header": "https://datatracker.ietf.org/doc/html/rfc7617",
}


def rand(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def mixed(n: int) -> str:
    """n characters of ALNUM with at least one upper, lower and digit."""
    while True:
        value = rand(ALNUM, n)
        if any(c.isupper() for c in value) and any(c.islower() for c in value):
            if any(c.isdigit() for c in value):
                return value


def luhn_complete(prefix: str, length: int) -> str:
    body = prefix + rand(DIGITS, length - len(prefix) - 1)
    for check in DIGITS:
        candidate = body + check
        total = 0
        for i, char in enumerate(reversed(candidate)):
            n = int(char) * (2 if i % 2 else 1)
            total += n - 9 if n > 9 else n
        if total % 10 == 0:
            return candidate
    raise AssertionError


def iban(country: str, bban_len: int) -> str:
    bban = rand(DIGITS, bban_len)
    rearranged = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in rearranged))
    return f"{country}{98 - number % 97:02d}{bban}"


def _card(prefix: str) -> str:
    """A number of the scheme's length: American Express (34, 37) issues 15 digits."""
    return luhn_complete(prefix, 15 if prefix == "37" else 16)


def password() -> str:
    words = ["Blue", "Heron", "Maple", "Tiger", "Lemon", "Otter", "Cedar", "Falcon", "Mango"]
    return f"{R.choice(words)}{R.choice(['-', '!', '#', '', '_'])}{R.choice(words).lower()}{rand(DIGITS, R.randint(2, 4))}"


def b64(n: int) -> str:
    return base64.b64encode(R.randbytes(n)).decode()


def jwt() -> str:
    def part(obj: str) -> str:
        return base64.urlsafe_b64encode(obj.encode()).decode().rstrip("=")

    head = part('{"alg":"HS256","typ":"JWT"}')
    body = part(
        f'{{"sub":"{rand(DIGITS, 10)}","name":"{rand(LOWER, 6)}","iat":{R.randint(1600000000, 1800000000)}}}'
    )
    return f"{head}.{body}.{rand(ALNUM + '-_', 43)}"


def pem() -> str:
    lines = "\n".join(b64(48) for _ in range(R.randint(3, 6)))
    kind = R.choice(["RSA ", "EC ", "", "ENCRYPTED "])
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{lines}\n-----END {kind}PRIVATE KEY-----"


def openssh() -> str:
    lines = "\n".join(b64(52) for _ in range(R.randint(3, 5)))
    return f"-----BEGIN OPENSSH PRIVATE KEY-----\n{lines}\n-----END OPENSSH PRIVATE KEY-----"


def putty() -> str:
    pub = "\n".join(b64(48) for _ in range(2))
    priv = "\n".join(b64(48) for _ in range(3))
    version = R.choice(["2", "3"])
    return (
        f"PuTTY-User-Key-File-{version}: ssh-rsa\nEncryption: none\nComment: rsa-key-{rand(DIGITS, 8)}\n"
        f"Public-Lines: 2\n{pub}\nPrivate-Lines: 3\n{priv}\nPrivate-MAC: {rand(HEX, 40)}"
    )


ENGLISH = Mnemonic("english").wordlist
FRENCH = Mnemonic("french").wordlist
SPANISH = Mnemonic("spanish").wordlist


def seed(n: int, words: list[str] = ENGLISH) -> str:
    return unicodedata.normalize("NFC", " ".join(R.choice(words) for _ in range(n)))


# --- secret kinds: (kind, value factory, carrier templates with {v}) ---------------------------
Value = Callable[[], str]
KINDS: list[tuple[str, Value, list[str]]] = [
    (
        "aws_access_key_id",
        lambda: "AKIA" + rand(UPPER + DIGITS, 16),
        [
            "the access key id for the backup user is {v}",
            "aws configure asked for the key id, I used {v}",
            "AWS key {v} belongs to the deploy role",
            "use {v} with the usual secret for the S3 sync",
        ],
    ),
    (
        "aws_secret_access_key",
        lambda: mixed(30) + rand(ALNUM + "/+", 10),
        [
            "aws_secret_access_key = {v}",
            "AWS secret access key: {v}",
            "the secret key of the backup user is {v}",
            "export AWS_SECRET_ACCESS_KEY={v}",
        ],
    ),
    (
        "github_token",
        lambda: R.choice(["ghp_", "gho_", "ghs_"]) + mixed(36),
        [
            "my GitHub token is {v}",
            "git push asks for a password, so I paste {v}",
            "CI uses {v} to publish releases",
            "token for the bot account: {v}",
        ],
    ),
    (
        "github_fine_grained",
        lambda: "github_pat_" + rand(UPPER + DIGITS, 22) + "_" + mixed(59),
        [
            "fine-grained token {v}",
            "I created {v} for the docs repo",
            "the new PAT is {v}",
            "read-only token for the mirror: {v}",
        ],
    ),
    (
        "gitlab_pat",
        lambda: "glpat-" + rand(ALNUM + "_-", 20),
        [
            "GitLab personal token: {v}",
            "clone with {v} as the password",
            "the gitlab token {v} expires in May",
            "PRIVATE-TOKEN header is {v}",
        ],
    ),
    (
        "gitlab_runner",
        lambda: "glrt-" + rand(ALNUM + "_-", 20),
        [
            "gitlab-runner register --token {v}",
            "the runner authentication token is {v}",
            "our shared runner uses {v}",
            "runner token {v} for the arm64 box",
        ],
    ),
    (
        "slack_bot_token",
        lambda: f"xoxb-{rand(DIGITS, 11)}-{rand(DIGITS, 13)}-{mixed(24)}",
        [
            "Slack bot token {v}",
            "the standup bot runs with {v}",
            "SLACK_BOT_TOKEN is {v}",
            "paste {v} into the integration settings",
        ],
    ),
    (
        "slack_app_token",
        lambda: f"xapp-1-A{rand(UPPER + DIGITS, 10)}-{rand(DIGITS, 13)}-{rand(HEX, 64)}",
        [
            "socket mode needs the app-level token {v}",
            "xapp token for the bot: {v}",
            "I generated {v} with connections:write",
            "the app token is {v}",
        ],
    ),
    (
        "slack_webhook",
        lambda: (
            f"https://hooks.slack.com/services/T{rand(UPPER + DIGITS, 8)}/B{rand(UPPER + DIGITS, 10)}/{mixed(24)}"
        ),
        [
            "alerts go to {v}",
            "the incoming webhook URL is {v}",
            "post to {v} when the build fails",
            "webhook for #ops: {v}",
        ],
    ),
    (
        "stripe_key",
        lambda: R.choice(["sk_live_", "rk_live_", "sk_test_"]) + mixed(R.choice([24, 99])),
        [
            "the Stripe secret key is {v}",
            "charge with {v} on the shop backend",
            "stripe key: {v}",
            "restricted key {v} only reads charges",
        ],
    ),
    (
        "openai_key",
        lambda: "sk-proj-" + rand(ALNUM + "_-", 48) + "T3BlbkFJ" + mixed(20),
        [
            "OpenAI key {v}",
            "OPENAI_API_KEY={v}",
            "the model server uses {v}",
            "my openai api key is {v}",
        ],
    ),
    (
        "anthropic_key",
        lambda: "sk-ant-api03-" + rand(ALNUM + "_-", 93) + "AA",
        [
            "Claude key: {v}",
            "the anthropic key {v} is on the team plan",
            "use {v} for the eval runs",
            "ANTHROPIC_API_KEY is {v}",
        ],
    ),
    (
        "google_api_key",
        lambda: "AIza" + rand(ALNUM + "_-", 35),
        [
            "Maps API key {v}",
            "the Firebase web key is {v}",
            "youtube data api uses {v}",
            "key={v} in the geocoding call",
        ],
    ),
    (
        "sendgrid_key",
        lambda: f"SG.{rand(ALNUM + '_-', 22)}.{rand(ALNUM + '_-', 43)}",
        [
            "SendGrid API key {v}",
            "the newsletter sends with {v}",
            "mail key: {v}",
            "SENDGRID_API_KEY={v}",
        ],
    ),
    (
        "twilio_key",
        lambda: "SK" + rand(HEX, 32),
        [
            "Twilio API key SID {v}",
            "the SMS service uses key {v}",
            "twilio key: {v}",
            "rotate {v} next week",
        ],
    ),
    (
        "mailgun_key",
        lambda: "key-" + rand(HEX, 32),
        [
            "Mailgun private key {v}",
            "the mailgun api key is {v}",
            "MAILGUN_API_KEY={v}",
            "transactional mail runs on {v}",
        ],
    ),
    (
        "shopify_token",
        lambda: R.choice(["shpat_", "shpca_", "shppa_", "shpss_"]) + rand(HEX, 32),
        [
            "Shopify admin token {v}",
            "the store app uses {v}",
            "shopify access token: {v}",
            "X-Shopify-Access-Token: {v}",
        ],
    ),
    (
        "azure_sas",
        lambda: (
            f"https://{rand(LOWER, 8)}.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-01-01T00:00:00Z&sig={b64(32).replace('+', '%2B').replace('/', '%2F').replace('=', '%3D')}"
        ),
        [
            "download the dump from {v}",
            "SAS URL: {v}",
            "the link {v} works until January",
            "share {v} with the auditor",
        ],
    ),
    (
        "azure_storage_connection",
        lambda: (
            f"DefaultEndpointsProtocol=https;AccountName={rand(LOWER, 10)};AccountKey={b64(64)};EndpointSuffix=core.windows.net"
        ),
        [
            "connection string: {v}",
            'AZURE_STORAGE_CONNECTION_STRING="{v}"',
            "the function app reads {v}",
            "storage account string is {v}",
        ],
    ),
    (
        "npm_token",
        lambda: "npm_" + mixed(36),
        [
            "//registry.npmjs.org/:_authToken={v}",
            "npm publish token {v}",
            "NPM_TOKEN={v}",
            "the automation token is {v}",
        ],
    ),
    (
        "pypi_token",
        lambda: "pypi-AgEIcHlwaS5vcmc" + rand(ALNUM + "_-", 120),
        [
            "PyPI upload token {v}",
            "twine password: {v}",
            "the trusted token is {v}",
            "TWINE_PASSWORD={v}",
        ],
    ),
    (
        "huggingface_token",
        lambda: "hf_" + mixed(34),
        [
            "Hugging Face token {v}",
            "huggingface-cli login with {v}",
            "HF_TOKEN={v}",
            "the read token is {v}",
        ],
    ),
    (
        "telegram_bot_token",
        lambda: f"{R.randint(100000000, 9999999999)}:AA{rand(ALNUM + '_-', 33)}",
        [
            "Telegram bot token {v}",
            "BotFather gave me {v}",
            "the bot runs with {v}",
            "TELEGRAM_TOKEN={v}",
        ],
    ),
    (
        "discord_bot_token",
        lambda: (
            f"{R.choice('MNO')}{rand(ALNUM, 23)}.{rand(ALNUM + '_-', 6)}.{rand(ALNUM + '_-', 27)}"
        ),
        [
            "Discord bot token: {v}",
            "the music bot logs in with {v}",
            "DISCORD_TOKEN={v}",
            "paste {v} into config.json",
        ],
    ),
    (
        "jwt",
        jwt,
        [
            "my session token is {v}",
            "Authorization: Bearer {v}",
            "the id_token came back as {v}",
            "cookie value {v}",
        ],
    ),
    (
        "digitalocean_token",
        lambda: "dop_v1_" + rand(HEX, 64),
        [
            "DigitalOcean token {v}",
            "doctl auth init with {v}",
            "DIGITALOCEAN_TOKEN={v}",
            "terraform uses {v} for droplets",
        ],
    ),
    (
        "databricks_token",
        lambda: "dapi" + rand(HEX, 32),
        [
            "Databricks PAT {v}",
            "the workspace token is {v}",
            "DATABRICKS_TOKEN={v}",
            "connect the notebook with {v}",
        ],
    ),
    (
        "vault_token",
        lambda: "hvs." + rand(ALNUM + "_-", 24 + R.randint(0, 70)),
        [
            "vault login {v}",
            "VAULT_TOKEN={v}",
            "the root token is {v}",
            "unseal done, token {v}",
        ],
    ),
    (
        "docker_hub_token",
        lambda: "dckr_pat_" + rand(ALNUM + "_-", 27),
        [
            "docker login -u me -p {v}",
            "Docker Hub access token {v}",
            "the registry token is {v}",
            "DOCKERHUB_TOKEN={v}",
        ],
    ),
    (
        "atlassian_token",
        lambda: "ATATT3xFfGF0" + rand(ALNUM + "_-", 170) + "=" + rand(HEX.upper(), 8),
        [
            "Jira API token {v}",
            "confluence token: {v}",
            "the atlassian token is {v}",
            "JIRA_API_TOKEN={v}",
        ],
    ),
    (
        "pem_private_key",
        pem,
        [
            "here is the server key:\n{v}",
            "{v}",
            "the TLS key is\n{v}\nkeep it safe",
            "key file contents: {v}",
        ],
    ),
    (
        "openssh_private_key",
        openssh,
        [
            "my ssh key:\n{v}",
            "{v}",
            "id_ed25519 is\n{v}",
            "deploy key below\n{v}",
        ],
    ),
    (
        "putty_private_key",
        putty,
        [
            "the .ppk file:\n{v}",
            "{v}",
            "PuTTY key for the jump host\n{v}",
            "I converted it to ppk:\n{v}",
        ],
    ),
    (
        "bip39_seed_phrase",
        lambda: seed(R.choice([12, 24])),
        [
            "my wallet recovery words: {v}",
            "{v}",
            "seed for the ledger is {v}",
            "write this down: {v}",
        ],
    ),
    (
        "bip39_seed_phrase_numbered",
        lambda: " ".join(f"{i + 1}. {w}" for i, w in enumerate(seed(12).split())),
        [
            "backup words {v}",
            "{v}",
            "the phrase is {v}",
            "metamask showed {v}",
        ],
    ),
    (
        "bip39_seed_phrase_other_language",
        lambda: seed(12, R.choice([FRENCH, SPANISH])),
        [
            "phrase de récupération : {v}",
            "{v}",
            "mis palabras: {v}",
            "mots du portefeuille {v}",
        ],
    ),
    (
        "wif_private_key",
        lambda: R.choice("KL") + rand(B58, 51),
        [
            "the paper wallet key is {v}",
            "import {v} into electrum",
            "WIF: {v}",
            "private key of the cold wallet {v}",
        ],
    ),
    (
        "totp_seed",
        lambda: rand(B32, 32),
        [
            "otpauth://totp/Example:me@example.com?secret={v}&issuer=Example",
            "2FA secret: {v}",
            "the authenticator setup key is {v}",
            "otpauth://totp/GitHub:me?secret={v}&algorithm=SHA1&digits=6",
        ],
    ),
    (
        "totp_seed_grouped",
        lambda: " ".join(rand(B32.lower(), 4) for _ in range(8)),
        [
            "setup key {v}",
            "enter this key in the app: {v}",
            "TOTP seed: {v}",
            "the 2FA key Google showed: {v}",
        ],
    ),
    (
        "recovery_codes",
        lambda: " ".join(f"{rand(HEX, 5)}-{rand(HEX, 5)}" for _ in range(4)),
        [
            "GitHub recovery codes: {v}",
            "backup codes {v}",
            "my recovery codes are {v}",
            "2FA backup codes: {v}",
        ],
    ),
    (
        "password_english",
        password,
        [
            "my password is {v}",
            "the wifi password is {v}",
            "password: {v}",
            "I set the router password to {v}",
            "email pw {v}",
            "Netflix login is me@example.com / password {v}",
        ],
    ),
    (
        "password_i18n",
        password,
        [
            "mon mot de passe est {v}",
            "Mein Passwort ist {v}",
            "mi contraseña es {v}",
            "minha senha é {v}",
            "la mia password è {v}",
            "mijn wachtwoord is {v}",
            "moje hasło to {v}",
            "şifrem {v}",
            "мой пароль {v}",
            "我的密码是{v}",
            "パスワードは{v}です",
            "비밀번호는 {v}입니다",
            "mật khẩu của tôi là {v}",
            "kata sandi saya adalah {v}",
            "मेरा पासवर्ड {v} है",
            "كلمة المرور هي {v}",
            "mitt lösenord är {v}",
            "salasana: {v}",
            "heslo je {v}",
            "Passwort lautet {v}",
            "mot de passe : {v}",
            "contraseña: {v}",
            "пароль: {v}",
            "wachtwoord: {v}",
            "hasło: {v}",
            "şifre: {v}",
            "senha: {v}",
            "密码\uff1a{v}",
            "パスワード: {v}",
            "비밀번호: {v}",
            "mật khẩu: {v}",
            "kata sandi: {v}",
            "पासवर्ड: {v}",
            "كلمة المرور: {v}",
            "jelszó: {v}",
            "parola mea este {v}",
        ],
    ),
    (
        "pin",
        lambda: rand(DIGITS, R.choice([4, 4, 6])),
        [
            "my PIN is {v}",
            "bank card pin: {v}",
            "the SIM PIN is {v}",
            "PIN {v} for the debit card",
            "Geheimzahl {v}",
            "code PIN : {v}",
        ],
    ),
    (
        "combination",
        lambda: "-".join(str(R.randint(0, 39)) for _ in range(3)),
        [
            "the combination to the gym locker is {v}",
            "bike lock combo {v}",
            "safe combination: {v}",
            "the padlock combination is {v}",
        ],
    ),
    (
        "door_code",
        lambda: rand(DIGITS, R.choice([4, 5, 6])),
        [
            "the door code is {v}",
            "digicode : {v}",
            "gate code {v} then press the bell",
            "Türcode {v}",
        ],
    ),
    (
        "verification_code",
        lambda: rand(DIGITS, 6),
        [
            "your verification code is {v}",
            "{v} is your login code",
            "OTP: {v}",
            "2FA code {v}",
        ],
    ),
    (
        "card_number",
        lambda: _card(R.choice(["4", "51", "37", "6011"])),
        [
            "my card number is {v}",
            "Visa {v} exp 04/29",
            "credit card: {v}",
            "pay with card {v}",
        ],
    ),
    (
        "cvv",
        lambda: rand(DIGITS, 3),
        [
            "CVV {v}",
            "the security code on the back is {v}",
            "cvc: {v}",
            "card verification value {v}",
        ],
    ),
    (
        "iban",
        lambda: iban(R.choice(["DE", "FR", "NL"]), R.choice([18])),
        [
            "my IBAN is {v}",
            "transfer to {v}",
            "IBAN: {v}",
            "account {v} at the local bank",
        ],
    ),
    (
        "env_file_line",
        password,
        [
            "DB_PASSWORD={v}",
            "POSTGRES_PASSWORD={v}",
            "export SMTP_PASS={v}",
            "REDIS_PASSWORD={v}",
            "ADMIN_SECRET={v}",
            "MYSQL_ROOT_PASSWORD={v}",
        ],
    ),
    (
        "command_line",
        password,
        [
            "sshpass -p '{v}' ssh admin@10.0.0.5",
            "curl -u alice:{v} https://api.example.com/v1/me",
            "mysql -u root -p{v} shop",
            "PGPASSWORD={v} psql -h db -U app",
            "redis-cli -h cache -a {v} ping",
            "docker login -u me -p {v} registry.example.com",
            "smbclient //nas/share -U bob%{v}",
            "xfreerdp /v:host /u:admin /p:{v}",
            "wget --user=bob --password={v} https://files.example.com/a.zip",
            'mongosh "mongodb://db" -u admin -p {v}',
        ],
    ),
    (
        "connection_string",
        password,
        [
            "postgres://app:{v}@db.example.com:5432/shop",
            "mongodb+srv://admin:{v}@cluster0.example.mongodb.net/test",
            "Server=db;Database=shop;User Id=sa;Password={v};",
            "redis://:{v}@cache:6379/0",
            "amqp://guest:{v}@rabbit:5672/",
            "jdbc:mysql://db:3306/shop?user=app&password={v}",
        ],
    ),
    (
        "wifi_qr",
        password,
        [
            "WIFI:T:WPA;S:HomeNet;P:{v};;",
            "the QR code says WIFI:S:Cafe Guest;T:WPA;P:{v};H:false;;",
            "WIFI:T:WPA2;S:Office-5G;P:{v};;",
            "scan this: WIFI:S:Flat;T:WPA;P:{v};;",
        ],
    ),
    (
        "basic_auth_header",
        lambda: base64.b64encode(f"admin:{password()}".encode()).decode(),
        [
            "Authorization: Basic {v}",
            "the header is Basic {v}",
            "curl -H 'Authorization: Basic {v}' https://x.example.com",
            "basic auth {v}",
        ],
    ),
    (
        "generic_api_key",
        lambda: mixed(40),
        [
            "my Cloudflare API token is {v}",
            "api_key: {v}",
            "the weather API key is {v}",
            "here is the key for the translation service: {v}",
        ],
    ),
]

# Split over two messages of one batch: (first message, second message template)
SPLITS = [
    ("my password is", "{v}"),
    ("the wifi password:", "{v}"),
    ("mot de passe :", "{v}"),
    ("okay the PIN is", "{v}"),
    ("mein Passwort ist", "{v} (bitte merken)"),
    ("my bank pin is", "{v}"),
    ("contraseña:", "{v}"),
    ("the door code is", "{v}"),
    ("パスワードは", "{v}"),
    ("the alarm code is", "{v}"),
    ("senha do wifi:", "{v}"),
    ("and the API key is", "{v}"),
]

# --- look-alikes: (kind, factory of a text) ------------------------------------------------------
Look = Callable[[], str]


def order_number() -> str:
    return luhn_complete(R.choice(["4", "5"]), 16)


def imei() -> str:
    return luhn_complete(R.choice(["35", "86", "01"]), 15)


LOOKALIKES: list[tuple[str, list[Look]]] = [
    (
        "luhn_order_number",
        [
            lambda: f"my order number is {order_number()}",
            lambda: f"tracking number {order_number()} shows it in Leipzig",
            lambda: f"invoice {order_number()} is paid",
            lambda: f"Bestellnummer {order_number()}",
            lambda: f"the booking reference {order_number()} is on the email",
            lambda: f"customer number {order_number()} at the gas company",
        ],
    ),
    (
        "imei",
        [
            lambda: f"my phone's IMEI is {imei()}",
            lambda: f"IMEI: {imei()}",
            lambda: f"the insurance needs the IMEI {imei()}",
            lambda: f"serial {imei()} on the box",
        ],
    ),
    (
        "secret_length",
        [
            lambda: f"the passcode is {R.choice([4, 6, 8])} digits long",
            lambda: f"my PIN is {R.choice([4, 6])} digits",
            lambda: f"the password must be {R.choice([8, 12, 16])} characters",
            lambda: f"Wi-Fi password is {R.choice([10, 12])} characters long",
            lambda: f"the code is {R.choice([5, 6])} digits",
            lambda: f"a {R.choice([4, 6])}-digit PIN is required",
        ],
    ),
    (
        "secret_status",
        [
            lambda: f"my API key was {R.choice(['revoked', 'rotated', 'deleted', 'leaked'])}",
            lambda: f"the token {R.choice(['expired', 'was revoked', 'is invalid'])} yesterday",
            lambda: f"my password was {R.choice(['reset', 'changed', 'compromised'])} last week",
            lambda: "I need to reset my password",
            lambda: "the password manager is Bitwarden",
            lambda: "the Wi-Fi password is on the fridge",
            lambda: "I forgot my PIN again",
            lambda: "my password is too long to type on the TV",
            lambda: "the API key is in the vault, not in the repo",
            lambda: "the secret is to add salt early",
        ],
    ),
    (
        "secret_talk_i18n",
        [
            lambda: "J'ai oublié mon mot de passe",
            lambda: "Ich muss mein Passwort ändern",
            lambda: "Olvidé mi contraseña otra vez",
            lambda: "Esqueci minha senha do banco",
            lambda: "我忘记了密码",
            lambda: "パスワードを忘れました",
            lambda: "비밀번호를 잊어버렸어요",
            lambda: "Я забыл пароль от почты",
            lambda: "Şifremi unuttum",
            lambda: "Zapomniałem hasła",
            lambda: "Tôi quên mật khẩu",
            lambda: "Saya lupa kata sandi",
            lambda: "मैं अपना पासवर्ड भूल गया",
            lambda: "نسيت كلمة المرور",
        ],
    ),
    (
        "version_number",
        [
            lambda: f"we upgraded to Python {R.randint(3, 3)}.{R.randint(8, 13)}.{R.randint(0, 9)}",
            lambda: f"the app is at v{R.randint(1, 9)}.{R.randint(0, 30)}.{R.randint(0, 20)}",
            lambda: (
                f"firmware {R.randint(1, 9)}.{R.randint(0, 9)}.{R.randint(0, 9)}-rc{R.randint(1, 4)} broke Bluetooth"
            ),
            lambda: f"Postgres {R.randint(12, 17)}.{R.randint(1, 9)} on the new server",
            lambda: (
                f"node {R.randint(16, 22)}.{R.randint(0, 12)}.{R.randint(0, 9)} and npm {R.randint(8, 10)}.{R.randint(0, 9)}.{R.randint(0, 9)}"
            ),
        ],
    ),
    (
        "commit_hash",
        [
            lambda: f"the regression came in with commit {rand(HEX, 40)}",
            lambda: f"revert {rand(HEX, 7)} please",
            lambda: f"git bisect points at {rand(HEX, 12)}",
            lambda: f"sha256 of the release: {rand(HEX, 64)}",
            lambda: f"the image digest is sha256:{rand(HEX, 64)}",
            lambda: f"md5 {rand(HEX, 32)} matches the mirror",
        ],
    ),
    (
        "phone_number",
        [
            lambda: f"call me at +49 30 {rand(DIGITS, 8)}",
            lambda: f"my number is (415) 555-{rand(DIGITS, 4)}",
            lambda: f"office: +44 20 {rand(DIGITS, 4)} {rand(DIGITS, 4)}",
            lambda: (
                f"mobile 06 {rand(DIGITS, 2)} {rand(DIGITS, 2)} {rand(DIGITS, 2)} {rand(DIGITS, 2)}"
            ),
            lambda: f"WhatsApp +1 212 555 {rand(DIGITS, 4)}",
        ],
    ),
    (
        "isbn",
        [
            lambda: (
                f"the book's ISBN is 978-{R.randint(0, 1)}-{rand(DIGITS, 3)}-{rand(DIGITS, 5)}-{R.randint(0, 9)}"
            ),
            lambda: f"ISBN 979{rand(DIGITS, 10)}",
            lambda: f"order the textbook 978{rand(DIGITS, 10)} from the library",
        ],
    ),
    (
        "uuid",
        [
            lambda: f"the document id is {_uuid()}",
            lambda: f"see ticket {_uuid()} in the tracker",
            lambda: f"request {_uuid()} failed with 502",
            lambda: f"the Google Doc is docs.google.com/document/d/{rand(ALNUM + '_-', 44)}/edit",
        ],
    ),
    (
        "crypto_address",
        [
            lambda: f"send the refund to bc1q{rand('023456789acdefghjklmnpqrstuvwxyz', 38)}",
            lambda: f"my ETH address is 0x{rand(HEX, 40)}",
            lambda: f"donations: 1{rand(B58, 33)}",
            lambda: f"the transaction hash is 0x{rand(HEX, 64)}",
        ],
    ),
    (
        "everyday_numbers",
        [
            lambda: (
                f"the meeting is at {R.randint(8, 18)}:{R.choice(['00', '15', '30', '45'])} in room {R.randint(100, 999)}"
            ),
            lambda: f"I paid {R.randint(10, 999)}.{rand(DIGITS, 2)} EUR for the tickets",
            lambda: f"my flight is LH{rand(DIGITS, 4)} on the {R.randint(1, 28)}th",
            lambda: f"the zip code is {rand(DIGITS, 5)}",
            lambda: f"we live at {R.randint(1, 200)} Elm Street, apartment {R.randint(1, 40)}",
            lambda: (
                f"I ran {R.randint(3, 42)}.{R.randint(0, 9)} km in {R.randint(20, 240)} minutes"
            ),
            lambda: (
                f"the coordinates are {R.randint(10, 60)}.{rand(DIGITS, 5)}, {R.randint(1, 30)}.{rand(DIGITS, 5)}"
            ),
            lambda: f"my employee number is {rand(DIGITS, 6)}",
            lambda: f"the parcel is {rand(DIGITS, 12)} with DHL",
            lambda: f"our dress code is smart casual and the area code is {rand(DIGITS, 3)}",
        ],
    ),
    (
        "identifiers",
        [
            lambda: f"the error was ERR_{rand(UPPER, 6)}_{rand(UPPER, 5)}",
            lambda: f"model RTX {R.choice([3060, 4070, 4090])} in the office PC",
            lambda: f"my username is {rand(LOWER, 6)}_{rand(DIGITS, 2)}",
            lambda: f"the repo is github.com/{rand(LOWER, 6)}/{rand(LOWER, 8)}",
            lambda: f"the video is youtube.com/watch?v={rand(ALNUM + '_-', 11)}",
            lambda: f"PR #{R.randint(100, 9999)} fixes the login bug",
            lambda: (
                f"the server is at {R.randint(10, 250)}.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}"
            ),
            lambda: f"the function is called get_user_preferences_for_{rand(LOWER, 6)}",
            lambda: f"the license plate is B-{rand(UPPER, 2)} {rand(DIGITS, 4)}",
            lambda: f"the config file is /etc/{rand(LOWER, 6)}/{rand(LOWER, 5)}.conf",
        ],
    ),
    (
        "bip39_words_in_prose",
        [
            lambda: "I would like to order a pizza with extra cheese and some olives for the kids",
            lambda: "We can visit the museum after lunch if the weather is good and the trains run",
            lambda: "Remember that my brother has a dog called Ginger and a cat that hates rain",
            lambda: "The report shows a clear increase in demand across every region this year",
        ],
    ),
    (
        "urls_and_code",
        [
            lambda: (
                f"the docs are at https://docs.example.com/{rand(LOWER, 6)}/{rand(LOWER, 8)}?page={R.randint(1, 9)}"
            ),
            lambda: f"clone https://github.com/{rand(LOWER, 6)}/{rand(LOWER, 6)}.git and run make",
            lambda: f"psql -h db.example.com -U {rand(LOWER, 5)} shop",
            lambda: f"ssh {rand(LOWER, 5)}@{rand(LOWER, 6)}.example.com -p {R.randint(2000, 2999)}",
            lambda: f"the CSS class is btn-{rand(LOWER, 5)}-{rand(LOWER, 4)}",
            lambda: (
                f"npm install {rand(LOWER, 6)}@{R.randint(1, 9)}.{R.randint(0, 9)}.{R.randint(0, 9)}"
            ),
            lambda: f"postgres://db.example.com:5432/{rand(LOWER, 6)} has no password set",
            lambda: f"set LOG_LEVEL=debug and PORT={R.randint(3000, 9000)}",
            lambda: f"the cron line is */{R.randint(2, 30)} * * * * /usr/local/bin/backup",
            lambda: (
                f"docker run -p {R.randint(3000, 9000)}:80 nginx:{R.randint(1, 2)}.{R.randint(20, 27)}"
            ),
        ],
    ),
    (
        "personal_facts_with_numbers",
        [
            lambda: f"my daughter turns {R.randint(2, 17)} on May {R.randint(1, 31)}",
            lambda: f"I was born in {R.randint(1950, 2005)}",
            lambda: (
                f"our anniversary is {R.randint(1, 28)}/{R.randint(1, 12)}/{R.randint(1990, 2020)}"
            ),
            lambda: f"I weigh {R.randint(50, 110)} kg and run {R.randint(2, 6)} times a week",
            lambda: f"my shoe size is {R.randint(36, 47)}",
            lambda: f"room {R.randint(100, 999)} at the Hilton, floor {R.randint(1, 9)}",
            lambda: (
                f"the bus {R.randint(1, 300)} leaves at {R.randint(5, 23)}:{R.choice(['05', '20', '35', '50'])}"
            ),
            lambda: f"my blood pressure was {R.randint(100, 150)}/{R.randint(60, 95)} today",
        ],
    ),
    (
        "security_prose",
        [
            lambda: "use a long passphrase instead of a short password",
            lambda: "the password policy asks for one symbol and one number",
            lambda: "two-factor authentication codes come by SMS",
            lambda: "I keep my recovery codes in a safe at home",
            lambda: "never share your seed phrase with anyone",
            lambda: "the TOTP app is Aegis",
            lambda: "our SSH keys are ed25519 now",
            lambda: "the DB_PASSWORD variable is set in the CI settings",
            lambda: "run mysql -u root -p and type it when asked",
            lambda: "curl -u needs user:password after it",
        ],
    ),
]


def _uuid() -> str:
    h = rand(HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _hidden(value: str) -> list[str]:
    """What must not survive: the value, or the body lines of a multi-line key."""
    if "\n" not in value:
        return [value]
    return [
        line
        for line in value.split("\n")
        if len(line) >= 40 and ":" not in line and "--" not in line
    ]


def build() -> dict[str, object]:
    secrets: list[dict[str, object]] = []
    for kind, value, templates in KINDS:
        count = max(6, len(templates))
        for i in range(count):
            v = value()
            template = templates[i % len(templates)]
            secrets.append(
                {
                    "kind": kind,
                    "text": template.format(v=v),
                    "hide": _hidden(v),
                    "split": "tune" if i % 2 == 0 else "report",
                }
            )
    for i, (first, second) in enumerate(SPLITS * 2):
        v = password()
        secrets.append(
            {
                "kind": "split_over_two_messages",
                "parts": [first, second.format(v=v)],
                "text": f"{first} / {second.format(v=v)}",
                "hide": [v],
                "split": "tune" if i % 2 == 0 else "report",
            }
        )
    lookalikes: list[dict[str, object]] = []
    for kind, makers in LOOKALIKES:
        for repeat in range(2 if len(makers) <= 10 else 1):
            for i, make in enumerate(makers):
                lookalikes.append(
                    {
                        "kind": kind,
                        "text": make(),
                        "split": "tune" if (i + repeat) % 2 == 0 else "report",
                    }
                )
    # one text per case: a repeated look-alike would count twice
    seen: set[str] = set()
    unique = []
    for case in lookalikes:
        if case["text"] not in seen:
            seen.add(str(case["text"]))
            unique.append(case)
    return {
        "about": (
            "Secret-redaction corpus v2, written by tests/corpora/make_secrets_v2.py (seeded "
            "random values in the documented shapes of SOURCES). `secrets`: `hide` must be gone "
            "after redaction; `parts` are two messages of one batch. `lookalikes` must come out "
            "unchanged. `split`: tune (rules adjusted on these) or report (measured only; other "
            "carrier sentences than the tune half)."
        ),
        "sources": SOURCES,
        "secrets": secrets,
        "lookalikes": unique,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(build(), ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {OUT}")
