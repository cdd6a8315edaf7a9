"""Secret formats in realistic prose, and benign sentences that must survive.

Every value is fake and generated deterministically from a fixed seed
(`fake`), in the shape (prefix, alphabet, length) of the real format; the
source holds no literal credential, so secret scanners have nothing to flag.

`SECRETS`: each `Secret` has the sentence a user might type (`text`), the
distinctive part that must never survive scrubbing (`needle`), and words of
the surrounding sentence that must (`keep`).  `BENIGN`: developer sentences
that look a little like secrets (git SHAs, UUIDs, "password reset flow",
"token bucket", URLs without credentials) and must come through unchanged.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def fake(seed: str, length: int, alphabet: str = ALNUM) -> str:
    """`length` characters of `alphabet`, the same for the same seed, every run."""
    out: list[str] = []
    counter = 0
    while len(out) < length:
        digest = hashlib.sha256(f"mnemo-fake:{seed}:{counter}".encode()).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return "".join(out[:length])


def fake_b64(seed: str, raw_bytes: int) -> str:
    return base64.b64encode(hashlib.shake_256(seed.encode()).digest(raw_bytes)).decode()


def _pem(label: str, seed: str, lines: int = 4) -> str:
    body = "\n".join(fake(f"{seed}{i}", 64, B64) for i in range(lines))
    tail = fake(seed + "tail", 24, B64)
    return f"-----BEGIN {label}-----\n{body}\n{tail}==\n-----END {label}-----"


@dataclass(frozen=True)
class Secret:
    name: str
    family: str
    text: str
    needle: str  # must never appear in the scrubbed text
    keep: tuple[str, ...] = ()  # words of the surrounding text that must survive


def _s(name: str, family: str, template: str, value: str, needle: str | None = None,
       keep: tuple[str, ...] = ()) -> Secret:
    return Secret(name, family, template.format(v=value), needle or value, keep)


# ─── Values ────────────────────────────────────────────────────────────────

_OPENAI = "sk-" + fake("openai", 48)
_OPENAI_PROJ = "sk-proj-" + fake("proj1", 74, URLSAFE) + "T3BlbkFJ" + fake("proj2", 74, URLSAFE)
_OPENAI_SVC = "sk-svcacct-" + fake("svc", 120, URLSAFE)
_OPENAI_ADMIN = "sk-admin-" + fake("adm", 90, URLSAFE)
_ANTHROPIC = "sk-ant-api03-" + fake("ant", 93, URLSAFE) + "AA"
_ANTHROPIC_ADMIN = "sk-ant-admin01-" + fake("antadm", 93, URLSAFE) + "AA"
_GHP = "ghp_" + fake("ghp", 36)
_GHO = "gho_" + fake("gho", 36)
_GHS = "ghs_" + fake("ghs", 36)
_GH_PAT = "github_pat_11" + fake("pat1", 20, UPPER_DIGITS) + "_" + fake("pat2", 59)
_GLPAT = "glpat-" + fake("glpat", 20, URLSAFE)
_GLRT = "glrt-" + fake("glrt", 20, URLSAFE)
DIGITS = "0123456789"
_XOXB = f"xoxb-{fake('xb1', 12, DIGITS)}-{fake('xb2', 13, DIGITS)}-{fake('xb3', 24)}"
_XOXP = f"xoxp-{fake('xp1', 12, DIGITS)}-{fake('xp2', 12, DIGITS)}-{fake('xp3', 32, HEX)}"
_SLACK_HOOK = ("https://hooks.slack.com/services/T" + fake("sh1", 8, UPPER_DIGITS) + "/B"
               + fake("sh2", 8, UPPER_DIGITS) + "/" + fake("sh3", 24))
_SK_LIVE = "sk_" + "live_" + fake("stripe", 99)
_RK_LIVE = "rk_" + "live_" + fake("rstripe", 99)
_WHSEC = "whsec_" + fake("whsec", 32)
_AKIA = "AKIA" + fake("akia", 16, UPPER_DIGITS)
_AWS_SECRET = fake("awssecret", 18) + "/" + fake("awssecret2", 10) + "+" + fake("awssecret3", 10)
_ASIA = "ASIA" + fake("asia", 16, UPPER_DIGITS)
_AWS_SESSION = "FwoGZXIvYXdzE" + fake("sess", 300, B64)
_AIZA = "AIza" + fake("aiza", 35, URLSAFE)
_GOCSPX = "GOCSPX-" + fake("gocspx", 28, URLSAFE)
_YA29 = "ya29." + fake("ya29", 150, URLSAFE)
_AZURE_KEY = fake_b64("azure", 64)
_AZURE_SIG = fake("sig1", 30, B64).replace("+", "%2B").replace("/", "%2F") + "%3D"
_AZURE_SB = fake_b64("servicebus", 32)
_SENDGRID = "SG." + fake("sg1", 22, URLSAFE) + "." + fake("sg2", 43, URLSAFE)
_TWILIO_SK = "SK" + fake("twsk", 32, HEX)
_TWILIO_TOKEN = fake("twtok", 32, HEX)
_DO = "dop_v1_" + fake("do", 64, HEX)
_NPM = "npm_" + fake("npm", 36)
_PYPI = "pypi-AgEIcHlwaS5vcmc" + fake("pypi", 60, URLSAFE)
_HF = "hf_" + fake("hf", 34)
_HEROKU_UUID = "-".join(fake(f"heroku{i}", n, HEX) for i, n in enumerate((8, 4, 4, 4, 12)))
_HRKU = "HRKU-AA" + fake("hrku", 58, URLSAFE)
_MAILGUN = "key-" + fake("mailgun", 32, "0123456789abcdefghijklmnopqrstuvwxyz")
_SENTRY_KEY = fake("sentry", 32, HEX)
_DISCORD = f"M{fake('disc1', 25)}.{fake('disc2', 6, URLSAFE)}.{fake('disc3', 38, URLSAFE)}"
_DISCORD_HOOK = ("https://discord.com/api/webhooks/" + fake("dh1", 18, "0123456789") + "/"
                 + fake("dh2", 68, URLSAFE))
_TELEGRAM = fake("tg1", 10, "123456789") + ":AA" + fake("tg2", 33, URLSAFE)
_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI" + fake("jwt1", 40, URLSAFE) + "."
        + fake("jwt2", 43, URLSAFE))
_RSA = _pem("RSA PRIVATE KEY", "rsa")
_OPENSSH = _pem("OPENSSH PRIVATE KEY", "openssh")
_PGP = _pem("PGP PRIVATE KEY BLOCK", "pgp")
_ENCRYPTED = _pem("ENCRYPTED PRIVATE KEY", "enc")
_EC = _pem("EC PRIVATE KEY", "ec", 2)
_PKCS8 = _pem("PRIVATE KEY", "pkcs8")
_PUTTY = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
          "Public-Lines: 2\n" + fake("pp1", 64, B64) + "\n" + fake("pp2", 20, B64) + "\n"
          "Private-Lines: 1\n" + fake("putty-private", 44, B64) + "\nPrivate-MAC: "
          + fake("pmac", 64, HEX))
_PW1 = "Vx9-" + fake("pw1", 12)
_PW2 = fake("pw2", 14) + "!#"
_PW3 = fake("pw3", 10) + "$9"
_PW4 = fake("pw4", 16)
_PW5 = "q" + fake("pw5", 11) + "7"
_PW6 = fake("pw6", 9) + "%x"
_PW7 = fake("pw7", 12)
_PW8 = fake("pw8", 13) + "@"
_DJANGO = "django-insecure-" + fake("django", 40,
                                    "abcdefghijklmnopqrstuvwxyz" + DIGITS + "!@#%^&*(-_=+)")
_FLASK = fake("flask", 32, HEX)
_B64_KEY = fake_b64("enckey", 32)
_HEX_KEY = fake("hexkey", 64, HEX)
_SIGNING = fake("signing", 48, HEX)
_BEARER = fake("bearer", 40, URLSAFE + ".")
_BASIC = base64.b64encode(f"deploy:{fake('basicpw', 14)}".encode()).decode()
_CURL_PW = fake("curlpw", 14)
_HVS = "hvs." + fake("vault", 90, URLSAFE)
_DAPI = "dapi" + fake("databricks", 32, HEX)
_SHPAT = "shpat_" + fake("shopify", 32, HEX)
_LINEAR = "lin_api_" + fake("linear", 40)
_AGE = "AGE-SECRET-KEY-1" + fake("age", 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L").upper()
_SNTRYS = "sntrys_" + fake("sntrys", 120, URLSAFE)
_CF_TOKEN = fake("cloudflare", 40, URLSAFE)
_MULTI = f"violet {fake('mw1', 6, 'abcdefghijklmnopqrstuvwxyz')} lantern {fake('mw2', 5, DIGITS)}"
_PW_AMP = fake("amp1", 8) + "&" + fake("amp2", 7)
_PW_CJK = fake("cjk", 11) + "#7"
# A token typed in full-width forms (each ASCII character + U+FEE0).
_WIDE_TOKEN = "".join(chr(ord(c) + 0xFEE0) for c in fake("wide", 20))
_ZH_TOKEN = fake("zhtoken", 32)
_NETRC_PW = _HEROKU_UUID.replace("-", "")[::-1][:8] + "-" + fake("netrc", 27, HEX)
# A Google Cloud service-account key, as `gcloud iam service-accounts keys create` writes it.
_GCP_KEY_ID = fake("gcpkeyid", 40, HEX)
_GCP_CLIENT_ID = "1" + fake("gcpclient", 20, DIGITS)
_GCP_JSON = ('{{"type": "service_account", "project_id": "acme-prod", "private_key_id": "{v}", '
             '"private_key": "' + _pem("PRIVATE KEY", "gcpsa", 1).replace("\n", "\\n") + '\\n", '
             '"client_email": "ci@acme-prod.iam.gserviceaccount.com", "client_id": "'
             + _GCP_CLIENT_ID + '", "token_uri": "https://oauth2.googleapis.com/token"}}')
_GCP_JSON_PRETTY = ('{{\n  "type": "service_account",\n  "project_id": "acme-prod",\n'
                    '  "private_key_id": "{v}",\n  "private_key": "'
                    + _pem("PRIVATE KEY", "gcpsa2", 1).replace("\n", "\\n") + '\\n",\n'
                    '  "client_email": "ci@acme-prod.iam.gserviceaccount.com",\n'
                    '  "client_id": "' + _GCP_CLIENT_ID + '",\n'
                    '  "token_uri": "https://oauth2.googleapis.com/token"\n}}')
_VAULT_SECRET_ID = "-".join(fake(f"vaultsid{i}", n, HEX) for i, n in enumerate((8, 4, 4, 4, 12)))
_VAULT_ROLE_ID = "-".join(fake(f"vaultrid{i}", n, HEX) for i, n in enumerate((8, 4, 4, 4, 12)))
_SLASH_PW = "Wm5" + fake("slashpw", 7) + "!x"
_JWT_HEAD, _JWT_BODY, _JWT_SIG = _JWT.split(".")
LOWER = "abcdefghijklmnopqrstuvwxyz"
# A seed phrase's shape: lowercase words of 3 to 8 letters.
SEED_12 = " ".join(fake(f"seed12-{i}", 3 + i % 6, LOWER) for i in range(12))
SEED_24 = " ".join(fake(f"seed24-{i}", 3 + (i * 5) % 6, LOWER) for i in range(24))
# An OpenSSH key's body without its BEGIN and END lines: base64 of `openssh-key-v1\0…`.
_OPENSSH_BARE = "\n".join(
    [base64.b64encode(b"openssh-key-v1\x00" + hashlib.shake_256(b"bare").digest(37)).decode()]
    + [fake(f"sshbare{i}", 70, B64) for i in range(3)] + [fake("sshbaretail", 12, B64) + "=="])
_RSA_BARE = "\n".join(["MIIEpAIBAAKCAQEA" + fake("rsabare0", 48, B64)]
                      + [fake(f"rsabare{i}", 64, B64) for i in range(1, 4)]
                      + [fake("rsabaretail", 20, B64) + "=="])
_PW_SYMBOL = "Tq7" + fake("tablepw", 6) + "#"

SECRETS: tuple[Secret, ...] = (
    # OpenAI
    _s("openai-legacy", "openai", "Set OPENAI_KEY to {v} before running the eval script.", _OPENAI,
       keep=("before running the eval script",)),
    _s("openai-project", "openai", "The new project key {v} works for the batch API.", _OPENAI_PROJ,
       keep=("works for the batch API",)),
    _s("openai-svcacct", "openai", "CI uses the service account key {v} now.", _OPENAI_SVC,
       keep=("CI uses the service account",)),
    _s("openai-admin", "openai", "Only the admin key {v} can list usage.", _OPENAI_ADMIN,
       keep=("can list usage",)),
    # Anthropic
    _s("anthropic-api03", "anthropic", "export ANTHROPIC_API_KEY={v} then run the agent",
       _ANTHROPIC, keep=("then run the agent",)),
    _s("anthropic-admin", "anthropic", "the admin key is {v}, keep it out of git", _ANTHROPIC_ADMIN,
       keep=("keep it out of git",)),
    # GitHub
    _s("github-ghp", "github", "my GitHub token is {v} and it expires in May", _GHP,
       keep=("expires in May",)),
    _s("github-gho", "github", "The OAuth app handed back {v} for the user.", _GHO,
       keep=("for the user",)),
    _s("github-ghs-in-url", "github",
       "git remote set-url origin https://x-access-token:{v}@github.com/acme/api.git", _GHS,
       keep=("github.com/acme/api.git",)),
    _s("github-fine-grained", "github", "use the fine-grained PAT {v} for the release job", _GH_PAT,
       keep=("for the release job",)),
    # GitLab
    _s("gitlab-pat", "gitlab", "GitLab needs {v} to push the tag.", _GLPAT,
       keep=("to push the tag",)),
    _s("gitlab-runner", "gitlab", "register the runner with --token {v} on the build host", _GLRT,
       keep=("on the build host",)),
    # Slack
    _s("slack-bot", "slack", "The bot posts with {v} into #deploys.", _XOXB,
       keep=("into #deploys",)),
    _s("slack-user", "slack", "slack user token: {v}", _XOXP, keep=("slack user",)),
    _s("slack-webhook", "slack", "Alerts go to {v} via curl.", _SLACK_HOOK,
       needle=_SLACK_HOOK[-24:], keep=("via curl",)),
    # Stripe
    _s("stripe-live", "stripe", "charge with {v} only in production", _SK_LIVE,
       keep=("only in production",)),
    _s("stripe-restricted", "stripe", "the restricted key {v} can only read charges", _RK_LIVE,
       keep=("can only read charges",)),
    _s("stripe-webhook", "stripe", "verify webhooks with the signing secret {v} in the handler",
       _WHSEC, keep=("in the handler",)),
    # AWS
    _s("aws-access-key", "aws", "The IAM user has access key {v} attached.", _AKIA,
       keep=("attached",)),
    _s("aws-secret-prose", "aws", "and the AWS secret is {v} for that user", _AWS_SECRET,
       keep=("for that user",)),
    _s("aws-secret-bare", "aws", "I pasted {v} into the console by mistake.", _AWS_SECRET,
       keep=("into the console by mistake",)),
    _s("aws-credentials-file", "aws",
       "[default]\naws_access_key_id = {v}\naws_secret_access_key = " + _AWS_SECRET
       + "\nregion = eu-west-1",
       _ASIA, keep=("region = eu-west-1", "[default]")),
    _s("aws-secret-credentials-line", "aws", "[prod]\naws_secret_access_key = {v}\noutput = json",
       _AWS_SECRET, keep=("output = json",)),
    _s("aws-session-token", "aws", "aws_session_token={v} expires hourly", _AWS_SESSION,
       needle=_AWS_SESSION[13:60]),
    # Google
    _s("google-api-key", "google", "Maps loads with key={v} on the landing page.", _AIZA,
       keep=("on the landing page",)),
    _s("google-api-key-prose", "google", "Our Firebase config has apiKey {v} in it.", _AIZA,
       keep=("in it",)),
    _s("google-oauth-secret", "google", "The OAuth client secret is {v} (web client).", _GOCSPX,
       keep=("(web client)",)),
    _s("google-oauth-token", "google", "curl it with access token {v} to test", _YA29,
       keep=("to test",)),
    _s("gcp-service-account", "google",
       '{{"type": "service_account", "private_key": "{v}", "client_email": "ci@acme.iam"}}',
       _PKCS8.replace("\n", "\\n"), needle=fake("pkcs80", 64, B64), keep=("client_email",)),
    # Its `private_key_id` too.  (Kept before "pem-unterminated": `tests/cputime.py`'s
    # ordinary text is this corpus repeated, and that entry's block runs to the next END.)
    _s("gcp-service-account-key-id", "google", _GCP_JSON, _GCP_KEY_ID,
       keep=('"private_key_id": "', '"client_email": "ci@acme-prod.iam.gserviceaccount.com"',
             '"client_id": "' + _GCP_CLIENT_ID + '"',
             '"token_uri": "https://oauth2.googleapis.com/token"')),
    _s("gcp-service-account-key-id-pretty", "google", _GCP_JSON_PRETTY,
       fake("gcpkeyid2", 40, HEX), keep=('  "client_id": "' + _GCP_CLIENT_ID + '",',)),
    # Azure
    _s("azure-storage", "azure",
       "DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={v};EndpointSuffix=core.windows.net",
       _AZURE_KEY, keep=("AccountName=acmelogs", "EndpointSuffix=core.windows.net")),
    _s("azure-sas", "azure",
       "download it from https://acme.blob.core.windows.net/c/a.zip"
       "?sv=2022-11-02&sr=b&sp=r&sig={v} today",
       _AZURE_SIG, keep=("today", "sv=2022-11-02")),
    _s("azure-service-bus", "azure",
       "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={v}",
       _AZURE_SB, keep=("SharedAccessKeyName=send",)),
    _s("azure-sql", "azure",
       "Server=tcp:acme.database.windows.net,1433;User ID=app;Password={v};Encrypt=True;", _PW1,
       keep=("Encrypt=True",)),
    # SendGrid, Twilio, DigitalOcean, Mailgun
    _s("sendgrid", "sendgrid", "SendGrid key {v} sends the password reset mails.", _SENDGRID,
       keep=("sends the password reset mails",)),
    _s("twilio-api-key", "twilio", "Twilio API key {v} is for the SMS worker.", _TWILIO_SK,
       keep=("for the SMS worker",)),
    _s("twilio-auth-token", "twilio", "TWILIO_AUTH_TOKEN={v}", _TWILIO_TOKEN),
    _s("digitalocean", "digitalocean", "doctl auth init -t {v} on the droplet", _DO,
       keep=("on the droplet",)),
    _s("mailgun", "mailgun", "mailgun api key {v} for the eu region", _MAILGUN,
       keep=("for the eu region",)),
    # Package registries, ML hubs, PaaS
    _s("npm-token", "npm", "publish with NPM_TOKEN set to {v} in CI", _NPM, keep=("in CI",)),
    _s("npmrc", "npm", "//registry.npmjs.org/:_authToken={v}", _NPM),
    _s("pypi-token", "pypi", "twine upload -u __token__ -p {v} dist/*", _PYPI, needle=_PYPI[20:70],
       keep=("dist/*",)),
    _s("huggingface", "huggingface", "download the weights with {v} from the hub", _HF,
       keep=("from the hub",)),
    _s("heroku-uuid", "heroku", "HEROKU_API_KEY={v}", _HEROKU_UUID),
    _s("heroku-hrku", "heroku", "heroku login with {v} worked", _HRKU, keep=("worked",)),
    _s("netrc", "heroku", "machine api.heroku.com\n  login ops@acme.dev\n  password {v}", _NETRC_PW,
       keep=("machine api.heroku.com",)),
    # Sentry, Discord, Telegram
    _s("sentry-dsn", "sentry", "SENTRY_DSN=https://{v}@o450123.ingest.sentry.io/5501234",
       _SENTRY_KEY, keep=("ingest.sentry.io",)),
    _s("sentry-token", "sentry", "sentry-cli uses {v} to upload sourcemaps", _SNTRYS,
       keep=("to upload sourcemaps",)),
    _s("discord-bot", "discord", "the Discord bot token {v} belongs to the mod bot", _DISCORD,
       keep=("belongs to the mod bot",)),
    _s("discord-webhook", "discord", "post build results to {v} please", _DISCORD_HOOK,
       needle=_DISCORD_HOOK[-68:], keep=("please",)),
    _s("telegram", "telegram", "the Telegram bot answers with {v} as token", _TELEGRAM,
       keep=("as token",)),
    # JWT, private keys
    _s("jwt", "jwt", "the session cookie holds {v} right now", _JWT, needle=_JWT[-43:],
       keep=("right now",)),
    _s("rsa-pem", "private-key", "here is the deploy key:\n{v}\nthanks!", _RSA,
       needle=fake("rsa1", 64, B64), keep=("thanks!", "here is the deploy key")),
    _s("openssh", "private-key", "my ~/.ssh/id_ed25519 is\n{v}\nwhy does ssh refuse it?", _OPENSSH,
       needle=fake("openssh2", 64, B64), keep=("why does ssh refuse it?",)),
    _s("pgp", "private-key", "backup of the signing key: {v} (do not lose)", _PGP,
       needle=fake("pgp0", 64, B64), keep=("(do not lose)",)),
    _s("encrypted-pem", "private-key", "the encrypted key\n{v}\nneeds the passphrase", _ENCRYPTED,
       needle=fake("enc3", 64, B64), keep=("needs the passphrase",)),
    _s("ec-pem", "private-key", "EC key for the TLS test:\n{v}", _EC, needle=fake("ec1", 64, B64)),
    _s("pem-unterminated", "private-key", "it starts like\n{v}", _PKCS8.split("\n-----END")[0],
       needle=fake("pkcs82", 64, B64)),
    _s("putty", "private-key", "the .ppk file says\n{v}\nand PuTTY loads it", _PUTTY,
       needle=fake("putty-private", 44, B64)),
    _s("age", "private-key", "age identity {v} decrypts the backups", _AGE,
       keep=("decrypts the backups",)),
    # URL credentials
    _s("postgres-url", "url", "DATABASE_URL=postgres://app:{v}@db.internal:5432/app then restart",
       _PW2, keep=("db.internal:5432/app then restart",)),
    _s("postgres-url-mention", "url",
       "connect to postgres://app:{v}@db.internal:5432/app and ping @oncall", _PW2,
       keep=("db.internal:5432/app", "ping @oncall")),
    _s("mysql-url", "url", "the legacy app reads mysql://root:{v}@10.0.0.5:3306/shop", _PW3,
       keep=("10.0.0.5:3306/shop",)),
    _s("mongodb-srv", "url", "MONGO_URI=mongodb+srv://svc:{v}@cluster0.ab1cd.mongodb.net/prod",
       _PW4, keep=("cluster0.ab1cd.mongodb.net/prod",)),
    _s("redis-password-only", "url", "cache is at redis://:{v}@cache.internal:6379/0 for sessions",
       _PW5, keep=("cache.internal:6379/0 for sessions",)),
    _s("amqp", "url", "celery broker amqp://worker:{v}@mq.internal:5672//", _PW6,
       keep=("mq.internal:5672",)),
    _s("https-basic", "url", "pip install --index-url https://ci:{v}@pypi.acme.dev/simple pkg",
       _PW7, keep=("pypi.acme.dev/simple pkg",)),
    _s("jdbc-query", "url",
       "jdbc:postgresql://db:5432/app?user=app&password={v}&ssl=true", _PW3, keep=("ssl=true",)),
    # Authorization headers
    _s("bearer", "auth", "curl -H 'Authorization: Bearer {v}' https://api.acme.dev/me", _BEARER,
       keep=("https://api.acme.dev/me",)),
    _s("bearer-prose", "auth", "I call it with Bearer {v} and get 401", _BEARER,
       keep=("and get 401",)),
    _s("basic-header", "auth", "the proxy wants Authorization: Basic {v} on every call", _BASIC,
       keep=("on every call",)),
    _s("curl-user", "auth", "curl -u deploy:{v} https://ci.acme.dev/job/build", _CURL_PW,
       keep=("https://ci.acme.dev/job/build",)),
    # Framework settings, .env
    _s("django-secret", "settings", "settings.py has SECRET_KEY = '{v}' and DEBUG = True", _DJANGO,
       keep=("DEBUG = True",)),
    _s("django-secret-line-start", "settings", "SECRET_KEY = '{v}'", _DJANGO),
    _s("flask-secret", "settings", "app.config['SECRET_KEY'] = '{v}'  # flask sessions", _FLASK,
       keep=("flask sessions",)),
    _s("env-file", "env", "my .env:\nDB_HOST=db\nDB_PASSWORD={v}\nDB_PORT=5432", _PW8,
       keep=("DB_PORT=5432", "DB_HOST=db")),
    _s("env-db-pass", "env", "DB_PASS={v}", _PW5),
    _s("env-export", "env", "export STRIPE_SECRET_KEY=\"{v}\" && npm start", _SK_LIVE,
       keep=("npm start",)),
    _s("cloudflare-env", "env", "CLOUDFLARE_API_TOKEN={v} wrangler deploy", _CF_TOKEN,
       keep=("wrangler deploy",)),
    _s("pgpassword", "env", "PGPASSWORD={v} psql -h db -U app", _PW7, keep=("psql -h db -U app",)),
    # YAML, JSON, TOML fields (multi-word values go whole)
    _s("yaml-multiword", "config", "database:\n  user: app\n  password: {v}\n  host: db",
       _MULTI, needle=_MULTI.split(" ", 1)[1], keep=("host: db", "user: app")),
    _s("yaml-quoted", "config", "smtp:\n  password: \"{v}\"\n  port: 587", _MULTI,
       needle=_MULTI.split(" ", 1)[1], keep=("port: 587",)),
    _s("yaml-list-item", "config", "- name: prod\n- password: {v}  # rotated monthly", _MULTI,
       needle=_MULTI.split(" ", 1)[1], keep=("# rotated monthly",)),
    _s("json-password", "config", '{{"user": "app", "password": "{v}", "port": 5432}}', _MULTI,
       needle=_MULTI.split(" ", 1)[1], keep=('"port": 5432',)),
    _s("toml-password", "config", "[db]\npassword = \"{v}\"\npool = 5", _MULTI,
       needle=_MULTI.split(" ", 1)[1], keep=("pool = 5",)),
    _s("ini-password", "config", "[smtp]\npass = {v}\nhost = mail.acme.dev", _PW1,
       keep=("host = mail.acme.dev",)),
    _s("properties", "config", "spring.datasource.password={v}", _PW2),
    # Phrases
    _s("my-password-is", "phrase", "my password is {v} if you need to log in", _PW3,
       keep=("if you need to log in",)),
    _s("the-password-is", "phrase", "The password is {v}.", _PW7, keep=("The password is",)),
    _s("password-for-is-quoted", "phrase",
       "the password for the staging db is '{v}' until Friday", _MULTI,
       needle=_MULTI.split(" ", 1)[1], keep=("until Friday",)),
    _s("passphrase-is", "phrase", "the passphrase was {v} for the old laptop", _PW6,
       keep=("for the old laptop",)),
    # The needle carries the word after it: six digits alone turn up on disk by
    # chance, as the microseconds of a timestamp (`…T04:01:47.482913`).
    _s("pin-is", "phrase", "my PIN is 482913 for the door", "482913", needle="482913 for",
       keep=("for the door",)),
    _s("cli-password", "phrase", "run mysqladmin --password {v} status", _PW4, keep=("status",)),
    _s("mysql-p", "phrase", "mysql -u root -p{v} shop < dump.sql", _PW8, keep=("shop < dump.sql",)),
    # A password with `&` in it (not a query string's next parameter)
    _s("password-ampersand-prose", "phrase", "the prod db password: {v} for the report",
       _PW_AMP, needle=_PW_AMP.split("&")[1], keep=("for the report",)),
    _s("secret-ampersand-env", "env", "secret={v} in the shell", _PW_AMP,
       needle=_PW_AMP.split("&")[1], keep=("in the shell",)),
    _s("set-password-to", "phrase", "set the wifi password to {v} for guests", _PW3,
       keep=("for guests",)),
    _s("use-as-password", "phrase", "use {v} as the staging password for now", _PW4,
       keep=("as the staging password for now",)),
    _s("password-for-equals", "phrase", "password for staging = {v}, ask ops", _PW7,
       keep=("password for staging =", "ask ops")),
    _s("password-apostrophe-s", "phrase", "the router password's {v} btw", _PW1,
       keep=("btw",)),
    _s("creds-user-slash", "config", "creds: admin/{v}", _PW5),
    _s("pw-colon", "config", "host db01, pw: {v}", _PW7, keep=("host db01",)),
    # Chinese, Japanese, Korean
    _s("zh-password-is", "cjk", "数据库密码是 {v}，别外传", _PW_CJK, keep=("别外传",)),
    _s("zh-password-colon", "cjk", "测试环境的密码：{v}", _PW_CJK, keep=("测试环境",)),
    _s("zh-password-is-colon", "cjk", "数据库密码是：{v}，别外传", _PW_CJK,
       keep=("数据库密码是：", "，别外传")),
    _s("zh-password-set-to", "cjk", "redis 的密码设置成了 {v}，记一下", _PW_CJK,
       keep=("redis 的密码设置成了", "记一下")),
    _s("zh-password-reset-to", "cjk", "管理员密码重置为 {v} 了", _PW5, keep=("了",)),
    _s("zh-password-bare", "cjk", "管理员账号 admin 密码 {v} 登录后台", _PW1, keep=("登录后台",)),
    # Mixed case is what makes it random: the phrase is matched over the lowered text,
    # and the value must be judged as written.
    _s("zh-password-bare-mixed-case", "cjk", "测试账号 dev 密码 {v} 好", "Qm7tRx2kLp",
       keep=("好",)),
    _s("zh-key-is", "cjk", "签名密钥是 {v}，不要提交", _HEX_KEY, keep=("不要提交",)),
    _s("zh-token-is", "cjk", "令牌是 {v}，有效期一天", _ZH_TOKEN, keep=("有效期一天",)),
    _s("ja-password", "cjk", "パスワードは {v} です", _PW_CJK, keep=("です",)),
    _s("ko-password", "cjk", "비밀번호는 {v} 입니다", _PW_CJK, keep=("입니다",)),
    # Command lines, markup, Dockerfiles
    _s("docker-login-p", "cli", "docker login -u bot -p {v} registry.acme.dev", _PW5,
       keep=("registry.acme.dev",)),
    _s("sshpass", "cli", "sshpass -p '{v}' ssh deploy@bastion", _PW6, keep=("ssh deploy@bastion",)),
    _s("az-login-p", "cli", "az login -u ci@acme.dev -p {v} --tenant acme", _PW5,
       keep=("--tenant acme",)),
    _s("mongo-p", "cli", "mongosh -u admin -p {v} --authenticationDatabase admin", _PW7,
       keep=("--authenticationDatabase admin",)),
    _s("redis-cli-a", "cli", "redis-cli -h cache -a {v} ping", _PW3, keep=("ping",)),
    _s("openssl-k", "cli", "openssl enc -aes-256-cbc -k {v} -in backup.tar", _PW8,
       keep=("-in backup.tar",)),
    _s("openssl-passout", "cli", "openssl pkcs12 -export -passout pass:{v} -out a.p12", _PW1,
       keep=("-out a.p12",)),
    _s("pgpass-line", "config", "cat ~/.pgpass\nlocalhost:5432:ledger:app:{v}\nok", _PW4,
       keep=("localhost:5432:ledger:app:", "ok")),
    _s("htpasswd-b", "cli", "htpasswd -b /etc/nginx/.htpasswd admin {v} && nginx -s reload",
       _PW1, keep=("admin", "&& nginx -s reload")),
    _s("htpasswd-nb", "cli", "htpasswd -nbB deploy '{v}' > users.htpasswd", _PW6,
       keep=("deploy", "> users.htpasswd")),
    # Passphrases of plain words
    _s("passphrase-words-is", "phrase", "the ssh key passphrase is {v}. Ask Dana for the key",
       "correct horse battery staple", needle="horse battery staple",
       keep=("the ssh key passphrase is", "Ask Dana for the key")),
    _s("passphrase-words-colon", "phrase", "passphrase: {v}", "my dog has fleas 42",
       needle="dog has fleas"),
    _s("passphrase-words-inline", "phrase", "the backup passphrase: {v}, rotate it yearly",
       "purple monkey dishwasher 7", needle="monkey dishwasher", keep=("rotate it yearly",)),
    # Full-width forms, as a Chinese, Japanese or Korean input method types them
    _s("wide-colon", "cjk", "数据库 password：{v}，别外传", _PW_CJK, keep=("数据库", "别外传")),
    _s("wide-equals", "cjk", "ＤＢ＿ＰＡＳＳＷＯＲＤ＝{v}", _PW4),
    _s("wide-key-and-value", "cjk", "ｔｏｋｅｎ：　ｓｋ－{v}", _WIDE_TOKEN),
    _s("xml-password", "config", "<datasource><password>{v}</password></datasource>", _PW8,
       keep=("</password></datasource>",)),
    _s("dockerfile-env", "config", "FROM python:3.12\nENV API_TOKEN {v}\nRUN make", _ZH_TOKEN,
       keep=("RUN make",)),
    # Labelled base64/hex keys
    _s("base64-key", "labelled", "the encryption key is {v} for the backups", _B64_KEY,
       keep=("for the backups",)),
    _s("hex-secret", "labelled", "HMAC secret: {v}", _HEX_KEY),
    _s("hex-signing-key-bare", "labelled", "sign requests with signing key {v} only", _SIGNING,
       keep=("only",)),
    _s("k8s-secret-data", "labelled", "data:\n  api-key: {v}\n  region: ZXUtd2VzdC0x", _B64_KEY,
       keep=("region: ZXUtd2VzdC0x",)),
    # More vendors
    _s("vault", "vendor", "VAULT_TOKEN is {v} on the bastion", _HVS, keep=("on the bastion",)),
    _s("databricks", "vendor", "the Databricks PAT {v} expires in 90 days", _DAPI,
       keep=("expires in 90 days",)),
    _s("shopify", "vendor", "the Shopify admin token {v} is for the sync job", _SHPAT,
       keep=("for the sync job",)),
    _s("linear", "vendor", "Linear API key {v} for the triage bot", _LINEAR,
       keep=("for the triage bot",)),
    # Reviewed defects: the reproductions, as reported.
    _s("mongosh-p-short", "cli", "mongosh -u admin -p {v}", "hunter2",
       keep=("mongosh -u admin -p",)),
    _s("mongo-host-p", "cli", "mongo --host db -u admin -p {v}", "Qm7tRx2kLp9",
       keep=("mongo --host db -u admin -p",)),
    _s("mongo-exec-mongosh-p", "cli", "docker exec -it mongo mongosh -u admin -p {v}",
       "Qm7tRx2kLp9", keep=("docker exec -it mongo mongosh",)),
    _s("mongosh-p-semicolon", "cli", "mongosh -u admin -p {v}; echo done", "hunter2",
       keep=("; echo done",)),
    _s("passphrase-config-comma", "config", "passphrase: tall tree, {v}", "Qm7tRx2kLp9"),
    _s("passphrase-config-words-comma", "config", "passphrase: correct horse, {v}",
       "battery staple"),
    _s("password-for-colon-equals", "phrase", "the password for staging := {v}", "hunter2",
       keep=("the password for staging :=",)),
    _s("password-for-double-equals", "phrase", "the password for staging == {v}", "Qm7tRx2kLp9",
       keep=("the password for staging ==",)),
    _s("password-for-arrow", "phrase", "the password for staging => {v}", "Qm7tRx2kLp9",
       keep=("the password for staging =>",)),
    _s("password-for-host", "phrase", "the password for db.example.com = {v}", "Qm7tRx2kLp9",
       keep=("the password for db.example.com =",)),
    _s("password-for-email", "phrase", "the password for admin@example.com: {v}", "Qm7tRx2kLp9",
       keep=("the password for admin@example.com:",)),
    _s("use-as-two-modifiers", "phrase", "use {v} as the new db password", "Tr0ub4dor3",
       keep=("as the new db password",)),
    _s("zh-password-already-updated", "cjk", "数据库密码已更新为 {v}", "Qm7tRx2kLp",
       keep=("数据库密码已更新为",)),
    _s("zh-password-already-set", "cjk", "redis 密码已经设置成了 {v}", "Qm7tRx2kLp",
       keep=("redis 密码已经设置成了",)),
    _s("zh-password-already-changed", "cjk", "数据库密码已改成 {v}", "hunter2",
       keep=("数据库密码已改成",)),
    _s("mongosh-capitalised", "cli", "Mongosh -u admin -p {v}", "hunter2",
       keep=("Mongosh -u admin -p",)),
    _s("openssl-k-capitalised", "cli", "OpenSSL enc -aes-256-cbc -k {v}", "hunter2",
       keep=("OpenSSL enc -aes-256-cbc -k",)),
    _s("redis-cli-capitalised", "cli", "Redis-cli -a {v}", "hunter2", keep=("Redis-cli -a",)),
    _s("az-login-capitalised", "cli", "Az Login -u x -p {v}", "hunter2", keep=("Az Login -u x",)),
    _s("mongosh-after-dashdash", "cli", "kubectl exec -it mongo-0 -- mongosh -u root -p {v}",
       "Vq8Lm3Tz6Rw", keep=("kubectl exec -it mongo-0 -- mongosh -u root -p",)),
    _s("mongosh-numeric-p", "cli", "mongosh -u root -p {v} --quiet", "730519",
       needle="-p 730519", keep=("mongosh -u root -p", "--quiet")),
    _s("cjk-still-password", "phrase", "测试环境的数据库密码还是 {v}", "letmein2024",
       keep=("测试环境的数据库密码还是",)),
    # Full-width punctuation ends a 都是/还是/也是 value (the text is read in ASCII).
    _s("zh-all-are-wide-comma", "cjk", "测试环境的账号密码都是 {v}，记得改", "qwerty88",
       keep=("测试环境的账号密码都是 ", "，记得改")),
    _s("zh-still-wide-semicolon", "cjk", "数据库密码还是 {v}；别外传", "dragon2024",
       keep=("数据库密码还是 ", "；别外传")),
    _s("zh-also-full-stop-wide", "cjk", "redis 密码也是 {v}。（测试环境）", "sunshine77",
       keep=("redis 密码也是 ", "。（测试环境）")),
    _s("zh-all-are-ideographic-comma-wide", "cjk", "账号和密码都是 {v}、别改（ＯＫ）", "monkey99x",
       keep=("账号和密码都是 ", "、别改（ＯＫ）")),
    # A key whose secret word has more words after it.
    _s("yaml-private-key-id", "google",
       "gcp:\n  project_id: acme-prod\n  private_key_id: {v}\n  client_email: ci@acme.iam",
       fake("gcpkeyid3", 40, HEX), keep=("private_key_id: ", "client_email: ci@acme.iam")),
    _s("camel-private-key-id", "google",
       'const sa = {{ privateKeyId: "{v}", clientEmail: "ci@acme.iam" }};',
       fake("gcpkeyid4", 40, HEX), keep=('clientEmail: "ci@acme.iam" };',)),
    _s("vault-secret-id", "vendor",
       'vault write auth/approle/login role_id="' + _VAULT_ROLE_ID + '" secret_id="{v}"',
       _VAULT_SECRET_ID, keep=(_VAULT_ROLE_ID,)),
    _s("rails-secret-key-base", "settings",
       "production:\n  secret_key_base: {v}\n  adapter: postgresql", fake("rails", 128, HEX),
       keep=("adapter: postgresql",)),
    _s("json-client-secret-value", "config", '{{"client_secret_value": "{v}", "ttl": 3600}}',
       "plum-orchid-42", keep=('"ttl": 3600',)),
    # Credential pairs
    _s("login-slash-pair", "phrase", "login admin/{v} for the staging db", "Qz8wVn3Lrk",
       keep=("login admin/", "for the staging db")),
    _s("credentials-same-word", "phrase", "default credentials {v} on the router", "admin/admin",
       keep=("default credentials admin/", "on the router")),
    _s("log-in-with-spaced-pair", "phrase", "log in with root / {v} to reach the bastion",
       "hunter42", keep=("log in with root / ", "to reach the bastion")),
    _s("user-comma-password", "phrase", "user: deploy, password {v} on the build box", "marmot77",
       keep=("user: deploy, password ", "on the build box")),
    _s("spaced-slash-pair", "phrase", "staging db is admin / {v} until Friday", _SLASH_PW,
       keep=("staging db is admin / ", "until Friday")),
    # JSON escaped inside JSON: `aws secretsmanager get-secret-value`, a log line.
    _s("secretsmanager-secret-string", "json",
       'the output was "SecretString": "{{\\"username\\":\\"admin\\",\\"password\\":'
       '\\"{v}\\"}}" and it works', fake("smstring", 14),
       keep=('\\"username\\":\\"admin\\"', "and it works")),
    _s("escaped-json-log-line", "json", 'log: {{\\"db\\": {{\\"password\\": \\"{v}\\"}}}}',
       fake("escjson", 12), keep=('log: {\\"db\\"',)),
    # A secret named in one field, its value in another.
    _s("k8s-env-name-value", "named",
       "my deployment.yaml has\nenv:\n  - name: DB_PASSWORD\n    value: \"{v}\"\n"
       "  - name: LOG_LEVEL\n    value: debug\nwhy does the pod crash?", fake("k8senv", 14),
       keep=("- name: DB_PASSWORD", "value: debug", "why does the pod crash?")),
    _s("cloudformation-parameter", "named",
       '[{{"ParameterKey":"DBPassword","ParameterValue":"{v}"}},'
       '{{"ParameterKey":"Env","ParameterValue":"prod"}}]', fake("cfnparam", 12),
       keep=('"ParameterKey":"DBPassword"', '"ParameterValue":"prod"')),
    _s("ssm-parameter-json", "named",
       '{{"Name": "/prod/db/password", "Type": "SecureString", "Value": "{v}"}}',
       fake("ssmjson", 12), keep=('"Type": "SecureString"',)),
    _s("ssm-put-parameter", "named",
       "aws ssm put-parameter --name /prod/db/password --value {v} --type SecureString",
       fake("ssmcli", 12), keep=("--type SecureString",)),
    _s("terraform-variable-default", "named",
       'variable "db_password" {{\n  type    = string\n  default = "{v}"\n}}',
       fake("tfdefault", 12), keep=("type    = string",)),
    _s("dotnet-appsettings-add", "named", '<add key="DbPassword" value="{v}" />',
       fake("dotnetadd", 12), keep=('<add key="DbPassword" value="',)),
    _s("spring-property-value", "named", '<property name="password" value="{v}"/>',
       fake("springprop", 12), keep=('<property name="password" value="',)),
    # Command lines that take a password.
    _s("sqlcmd-capital-p", "cli", "sqlcmd -S db -U sa -P {v} -Q 'select 1'", fake("sqlcmd", 12),
       keep=("sqlcmd -S db -U sa -P", "-Q 'select 1'")),
    _s("ldapsearch-w", "cli", "ldapsearch -x -D cn=admin,dc=acme -w {v} -b dc=acme",
       fake("ldapw", 12), keep=("-b dc=acme",)),
    _s("smbclient-user-percent", "cli", "smbclient //srv/share -U bob%{v} -c ls",
       fake("smbpct", 12), keep=("-U bob%", "-c ls")),
    _s("net-use-user", "cli", "net use Z: \\\\srv\\share /user:bob {v} /persistent:yes",
       fake("netuse", 12), keep=("/user:bob", "/persistent:yes")),
    _s("twine-upload-p", "cli", "twine upload -u __token__ -p {v} dist/*", fake("twinep", 16),
       keep=("dist/*",)),
    _s("docker-password-stdin", "cli", "echo {v} | docker login -u me --password-stdin",
       fake("pwstdin", 12), keep=("| docker login -u me --password-stdin",)),
    _s("sudo-stdin", "cli", "echo '{v}' | sudo -S apt-get update", fake("sudos", 12),
       keep=("| sudo -S apt-get update",)),
    _s("chpasswd-pipe", "cli", 'echo "bob:{v}" | chpasswd', fake("chpasswd", 12),
       keep=('echo "bob:', "| chpasswd")),
    _s("wrangler-secret-put", "cli", "echo -n {v} | wrangler secret put DB_PASSWORD",
       fake("wrangler", 12), keep=("| wrangler secret put DB_PASSWORD",)),
    _s("gh-secret-set-body", "cli", "gh secret set DB_PASSWORD --body {v} --repo acme/api",
       fake("ghbody", 12), keep=("--repo acme/api",)),
    _s("keytool-storepass", "cli", "keytool -genkeypair -alias app -storepass {v} -validity 365",
       fake("keytool", 12), keep=("-validity 365",)),
    _s("seven-zip-glued-p", "cli", "7z a -p{v} backup.7z ./db", fake("sevenz", 12),
       keep=("backup.7z ./db",)),
    _s("zip-capital-p", "cli", "zip -r -P {v} out.zip dist", fake("zipp", 12),
       keep=("out.zip dist",)),
    _s("rabbitmqctl-add-user", "cli", "rabbitmqctl add_user admin {v} && rabbitmqctl list_users",
       fake("rabbit", 12), keep=("&& rabbitmqctl list_users",)),
    _s("fish-set-export", "cli", "set -gx DB_PASSWORD {v}; and ./run", fake("fishset", 12),
       keep=("set -gx DB_PASSWORD", "and ./run")),
    _s("windows-setx", "cli", "setx DB_PASSWORD {v} /M", fake("setx", 12), keep=("/M",)),
    _s("sql-identified-by", "cli", "CREATE USER 'app'@'%' IDENTIFIED BY '{v}'; then grant",
       fake("identby", 12), keep=("CREATE USER 'app'@'%' IDENTIFIED BY '", "then grant")),
    _s("aws-secret-string-flag", "cli",
       "aws secretsmanager put-secret-value --secret-id prod/db --secret-string {v}",
       fake("secretstr", 14), keep=("--secret-id prod/db",)),
    # The word for a password in other languages.
    _s("german-passwort", "config", "Passwort: {v}", fake("passwort", 12)),
    _s("french-mot-de-passe", "config", "mot de passe : {v}", fake("motdepasse", 12),
       keep=("mot de passe",)),
    _s("spanish-contrasena", "config", "contraseña: {v}", fake("contrasena", 12)),
    _s("portuguese-senha", "config", "senha: {v}", fake("senha", 12)),
    _s("russian-parol", "config", "пароль: {v}", fake("parol", 12), keep=("пароль",)),
    _s("zh-bracketed-password", "cjk", "【密码】{v}", fake("zhbracket", 12), keep=("【密码】",)),
    # Capability URLs and sessions: whoever holds them is let in.
    _s("s3-presigned-signature", "url",
       "download https://bkt.s3.amazonaws.com/f.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256"
       "&X-Amz-Signature={v} before it expires", fake("amzsig", 64, HEX),
       keep=("X-Amz-Algorithm=AWS4-HMAC-SHA256", "before it expires")),
    _s("gcs-signed-signature", "url",
       "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={v}",
       fake("googsig", 256, HEX), keep=("X-Goog-Algorithm=GOOG4-RSA-SHA256",)),
    _s("teams-incoming-webhook", "url",
       "post alerts to https://acme.webhook.office.com/webhookb2/{v} from the pager",
       "-".join(fake(f"teams{i}", n, HEX) for i, n in enumerate((8, 4, 4, 4, 12)))
       + "@" + "-".join(fake(f"teamt{i}", n, HEX) for i, n in enumerate((8, 4, 4, 4, 12)))
       + "/IncomingWebhook/" + fake("teamshook", 32, HEX),
       keep=("post alerts to https://acme.webhook.office.com/webhookb2/", "from the pager")),
    _s("zapier-catch-hook", "url", "zap: https://hooks.zapier.com/hooks/catch/1234567/{v}/ ok",
       fake("zapier", 7).lower(), keep=("hooks/catch/1234567/", "/ ok")),
    _s("hex-token-as-url-user", "url", "git clone https://{v}@github.com/acme/api.git",
       fake("hexuser", 40, HEX), keep=("@github.com/acme/api.git",)),
    _s("cookie-header", "http", "curl -H 'Cookie: sessionid={v}; theme=dark' https://acme.dev",
       fake("cookie", 24), keep=("theme=dark", "https://acme.dev")),
    _s("set-cookie-header", "http",
       "the response has Set-Cookie: session={v}; Path=/; HttpOnly; Secure", fake("setcookie", 32),
       keep=("Path=/; HttpOnly; Secure",)),
    # A token wrapped across two lines (a narrow terminal), or broken by a space.
    _s("openai-wrapped-line", "wrapped", "export OPENAI_API_KEY={v}\nthen run the eval",
       "sk-proj-" + fake("wrapoa1", 20) + "\n" + fake("wrapoa2", 32),
       needle=fake("wrapoa2", 32), keep=("then run the eval",)),
    _s("github-wrapped-short-first", "wrapped", "push with {v} today",
       "ghp_" + fake("wrapgh1", 16) + "\n" + fake("wrapgh2", 20),
       needle=fake("wrapgh2", 20), keep=("push with", "today")),
    _s("github-split-by-space", "wrapped", "the token is {v} for the bot",
       "ghp_" + fake("wrapsp1", 16) + " " + fake("wrapsp2", 20),
       needle=fake("wrapsp2", 20), keep=("for the bot",)),
    # A JWT wrapped at its dots, or with a space typed after one.
    _s("jwt-wrapped-at-dots", "jwt", "the id token:\n{v}\nexpires in an hour",
       f"{_JWT_HEAD}.\n{_JWT_BODY}.\n{_JWT_SIG}", needle=_JWT_SIG,
       keep=("the id token:", "expires in an hour")),
    _s("jwt-space-after-dot", "jwt", "send {v} as the bearer",
       f"{_JWT_HEAD}. {_JWT_BODY}. {_JWT_SIG}", needle=_JWT_BODY, keep=("as the bearer",)),
    _s("jwt-signature-wrapped", "jwt", "cookie jwt={v}", f"{_JWT_HEAD}.{_JWT_BODY}.\n{_JWT_SIG}",
       needle=_JWT_SIG),
    # URL credentials whose password holds a `/` or a space, as typed.
    _s("url-password-with-slash", "url", "DATABASE_URL is postgres://app:{v}@db:5432/x for now",
       "pa/" + fake("urlslash", 10), keep=("@db:5432/x for now",)),
    _s("url-password-with-space", "url", "clone https://deploy:{v}@git.acme.dev/api.git today",
       fake("urlsp1", 6) + " " + fake("urlsp2", 6), keep=("@git.acme.dev/api.git today",)),
    _s("amqp-password-with-slashes", "url", "amqp://svc:{v}@mq.internal/vhost",
       fake("amqps1", 5) + "/" + fake("amqps2", 5) + "/x", keep=("@mq.internal/vhost",)),
    # A Markdown table of credentials.
    _s("markdown-table-password", "table",
       "| env | user | password |\n|-----|------|----------|\n| prod | admin | {v} |\n"
       "| dev | - | - |", _PW_SYMBOL, keep=("| prod | admin |", "| dev | - | - |")),
    _s("markdown-table-api-key", "table",
       "Keys:\n\n| Service | API key |\n| :--- | :--- |\n| stripe | {v} |", fake("tablekey", 24),
       keep=("| stripe |",)),
    _s("markdown-table-zh-password", "table", "| 环境 | 账号 | 密码 |\n| --- | --- | --- |\n"
       "| 测试 | root | {v} |", "hunter" + fake("tablezh", 3, DIGITS), keep=("| 测试 | root |",)),
    # A two-column table of settings: the row's key names the secret.
    _s("markdown-key-value-password", "table",
       "| key | value |\n|---|---|\n| host | db.internal |\n| password | {v} |",
       "Hunter" + fake("kvpw", 4, DIGITS), keep=("| host | db.internal |", "| password |")),
    _s("markdown-key-value-env-secret", "table",
       "| Setting | Value |\n| --- | --- |\n| DB_PASSWORD | {v} |\n| PORT | 5432 |",
       fake("kvenv", 10) + "!", keep=("| PORT | 5432 |", "| DB_PASSWORD |")),
    # A value held on the lines after its key.
    _s("yaml-block-scalar-password", "held", "db:\n  password: |\n    {v}\n  user: app",
       "Hunter" + fake("heldyaml", 5, DIGITS), keep=("db:\n  password: |", "  user: app")),
    _s("yaml-folded-api-key", "held", "api_key: >-\n  {v}\nregion: eu", fake("heldfold", 32),
       keep=("region: eu",)),
    _s("python-triple-quoted-key", "held", 'API_KEY = """\n{v}\n"""\nDEBUG = True',
       fake("heldtriple", 30), keep=("DEBUG = True",)),
    _s("python-parenthesised-secret", "held",
       'SECRET = (\n    "{v}"\n    "{v}"\n)', fake("heldparen", 18),
       keep=("SECRET = (",)),
    _s("json-value-on-next-line", "held", '{{"user": "app", "password":\n  "{v}"}}',
       fake("heldjson", 8) + "!", keep=('"user": "app"',)),
    _s("shell-continued-password", "held", "export DB_PASS=\\\n  {v}\nmake migrate",
       fake("heldsh", 10) + "#", keep=("make migrate",)),
    # A wallet's seed phrase under its label.
    _s("seed-phrase-12", "seed", "my wallet seed phrase: {v}. keep it offline", SEED_12,
       needle=SEED_12.split(" ", 6)[-1], keep=("keep it offline",)),
    _s("mnemonic-24-lines", "seed", "Mnemonic:\n{v}\n(written on paper too)", SEED_24,
       needle=SEED_24.split(" ", 20)[-1], keep=("(written on paper too)",)),
    _s("zh-mnemonic", "seed", "助记词：{v}", SEED_12, needle=SEED_12.split(" ", 3)[-1]),
    # A private key's body pasted without its BEGIN and END lines.
    _s("openssh-bare-body", "private-key", "the key file holds\n{v}\nand nothing else",
       _OPENSSH_BARE, needle=fake("sshbare1", 70, B64), keep=("and nothing else",)),
    _s("rsa-bare-body", "private-key", "RSA private key (no header):\n{v}\nthanks",
       _RSA_BARE, needle=fake("rsabare2", 64, B64), keep=("thanks",)),
    # A password named in prose without a key.
    _s("wifi-pass-is", "prose", "the wifi pass is {v} for guests",
       "hunter" + fake("wifi", 2, DIGITS) + "!", keep=("for guests",)),
    _s("login-user-colon-password", "prose", "login admin:{v} on the console", _PW_SYMBOL,
       keep=("on the console",)),
    _s("admin-colon-password", "prose", "use admin:{v} to get in",
       "Tr0ub4dor&" + fake("adm", 1, DIGITS), keep=("to get in",)),
    _s("pw-colon-typed-password", "config", "pw: {v}", "hunter" + fake("pwcolon", 2, DIGITS)),
)

# ─── Benign sentences: scrubbing must leave them exactly as they are ──────

BENIGN: tuple[str, ...] = (
    "Merged 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 into main after the review.",
    "Short SHA 3f9a2c1 fixed the flaky test on CI.",
    "Request id 123e4567-e89b-12d3-a456-426614174000 failed with a 502.",
    "We need a password reset flow with email confirmation.",
    "The token bucket refills 10 tokens per second.",
    "People write sk-learn but the package is scikit-learn.",
    "max_tokens: 4096 is the model limit for this endpoint.",
    "Set the tokenizer: bert-base-uncased in the config.",
    "https://docs.python.org/3/library/re.html explains look-behind assertions.",
    "Clone git@github.com:acme/api.git and run make.",
    "ssh://git@github.com/acme/api.git is the mirror.",
    "postgres://localhost/app is the dev database.",
    "Base64 of hello world is aGVsbG8gd29ybGQ= in the fixture.",
    "The primary key: id, and the sort key: created_at.",
    "password_min_length: 12 is set in the policy file.",
    "The function returns a bearer token to the caller.",
    "Basic configuration lives in settings.py.",
    "Authorization is handled by the API gateway.",
    "The key is to keep functions small.",
    "The secret is out: we ship on Friday.",
    "My password is stored in the team's password manager.",
    "The password is hashed with argon2id before it is stored.",
    "Rotate the API key every 90 days.",
    "Run pytest -k token to filter the tests.",
    "AKIA is the prefix of AWS access key ids.",
    "Read it from the environment: password=${DB_PASSWORD}.",
    "Set api_key=<your key> in the config file.",
    "The PIN pad is on the left of the door.",
    "Port 5432 on localhost:5432 is Postgres.",
    "Error: permission denied (publickey).",
    "id_rsa.pub is the public key; never share id_rsa itself.",
    "Certificates start with -----BEGIN CERTIFICATE----- and are public.",
    "docker run -p 8080:80 -u 1000:1000 nginx",
    "The token count was 1234 for that request.",
    "Use the keyring library to store secrets.",
    "GET https://api.example.com/v1/users?page=2&sort=asc returns JSON.",
    "Email jane.doe@example.com about the release notes.",
    "Version 1.2.3-beta.4 was tagged yesterday.",
    "The regex [A-Za-z0-9]{40} matches the hashes.",
    "We store session ids, not passwords, in Redis.",
    "sha256 of an empty file is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
    "The base64 'SGVsbG8sIFdvcmxkIQ==' decodes to Hello, World!",
    "A JWT has three parts: header.payload.signature.",
    "python -m http.server --bind 127.0.0.1 8000",
    "Refresh tokens last 30 days; access tokens last an hour.",
    "The keyboard shortcut is Ctrl+K.",
    "Secret Santa is on Friday.",
    "Use the OAuth2 client credentials flow for the cron job.",
    "The Authorization header must start with Bearer followed by a space.",
    "curl -u admin https://ci.acme.dev asks for the password.",
    "Passwordless login uses WebAuthn.",
    "The API accepts an x-api-key header.",
    "SELECT password_hash FROM users WHERE id = 1;",
    "git log --oneline | head -n 20",
    "The PNG starts with iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
    "DwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "Run `mnemo remember 'we deploy with make release'` after the merge.",
    "The mnemonic for the hardware wallet is kept offline.",
    "Tasks like task-runner-cleanup-nightly run at 02:00.",
    "We deploy with `make release`, never by hand.",
    "The auth: service is down; try again later.",
    "密码重置流程需要邮件确认。",
    "令牌桶每秒补充 10 个令牌。",
    "密码是用 argon2id 哈希后存储的。",
    "密码：****** 只是占位符。",
    "密码就是生日，别问了。",
    "密码还是老的那个。",
    "密码还是 SSO 统一管理，不用单独记。",
    "密码是 ${DB_PASSWORD}，从环境变量读取。",
    "密钥是 RSA 2048 位的。",
    "パスワードは必須です。",
    "docker login registry.acme.dev && docker run -p 8080:80 nginx",
    "docker login --password-stdin registry.acme.dev",
    "Set the password to something only you know.",
    "Use it as the password for the test account.",
    "The password's hash is stored with argon2id.",
    "The pw is in the team vault.",
    "credentials: see the vault entry",
    "Send the password reset link to the user.",
    "<password>${DB_PASSWORD}</password> comes from the environment.",
    "<password-policy>strict</password-policy>",
    "ENV NODE_ENV production",
    "GET https://api.example.com/v1/users?token_type=bearer&page=2 returns JSON.",
    "The password is ${DB_PASSWORD}, from the environment.",
    "The password is {{ vault_db_password }} in the prod inventory.",
    "htpasswd -B -c .htpasswd dana then reload nginx",
    "12:30:45:00:done",
    "2024-01-01:12:30:45:ERROR",
    "redis-cli -h cache ping",
    "openssl req -new -key server.key -out server.csr",
    "mongosh -u admin -p --authenticationDatabase admin",
    "htpasswd -c /etc/nginx/.htpasswd admin asks for the password twice.",
    "The passphrase is stored in the vault.",
    "The passphrase is required for every push.",
    "The passphrase is the same as the wifi one.",
    "中文标点保留：逗号，句号。全角空格　也保留（ＯＫ）。",
    "ｐａｓｓｗｏｒｄ　ｒｅｓｅｔ　ｆｌｏｗ：发送邮件确认。",
    # Reviewed defects: the reproductions, as reported.
    "docker run -d --name mongo -p 27017:27017 mongo:7",
    "The mongo container needs mkdir -p /data/db",
    "kubectl port-forward svc/mongo 9999:27017 -p 9999",
    "We use bcrypt as the password hashing algorithm.",
    "Use 1Password as the password manager",
    "Stop using MD5 as the password hash",
    "try again as the password prompt …",
    "the passphrase is rotated every 90 days",
    "The passphrase is cached by gpg-agent for 10 minutes",
    "the cert is self-signed with openssl so use curl -k https://localhost:8443/health",
    "redis-cli --scan then ls -a /var/lib/redis",
    "htpasswd -b is insecure because the password shows up in ps",
    "htpasswd -nb prints the hash to stdout",
    "密码都是 bcrypt 加密存储的",
    "密码还是 SSO 统一管理",
    "密码也是 8 位以上",
    "密码（Password）：可选",
    "字段说明：Password：必填项",
    "redis-cli -a $(cat /run/secrets/redis)",
    "openssl enc -k $(cat key.txt)",
    "htpasswd -b f $USER $(cat pw)",
    "az login -u x -p $(cat pw.txt)",
    "docker login -p $(cat pw)",
    "redis-cli -a `cat /run/secrets/redis`",
    "az login -u bot -p PASSWORD",
    "docker login -u bot -p YOUR_PASSWORD registry.acme.dev",
    # Full-width punctuation after 都是/还是/也是: a scheme or a length, not a password.
    "密码还是 SSO，不用单独记。",
    "密码都是 bcrypt，加密存储。",
    "密码也是 8 位以上，记得改。",
    # Keys named after a secret whose value is a setting, not the secret.
    '{"key_id_format": "uuid", "token_type": "Bearer", "api_key_header": "X-API-Key"}',
    '{"type": "service_account", "token_uri": "https://oauth2.googleapis.com/token"}',
    "access_token_url: https://auth.acme.dev/oauth2/token",
    '"private_key_path": "/etc/ssl/private/server2.key"',
    '"secret_name": "prod-db-creds-v2", "api_key_env": "OPENAI_API_KEY"',
    '"secret_mount": "kv2/prod", "token_audience": "api-v2-prod"',
    '"client_id": "109876543210987654321" is the public OAuth client id.',
    '"key_id": "123e4567-e89b-12d3-a456-426614174000" names the signing key.',
    "tokenizer_name: bert-base-uncased2",
    # Slashes: paths, ratios and pairs of names, not a user and a password.
    "Paths and ratios: src/main, read/write, 1/2, TCP/IP, input/output, CI/CD, client/server, "
    "docs/api/v2.",
    "Spaced: read / write, TCP / IP, client / server, input / output, 1 / 2, docs / api / v2.",
    "Targets: linux / Windows11, macOS / Sonoma14, aws / S3Bucket.",
    "The login page/form and the login/logout flow need tests.",
    "Sign in with Google/GitHub or log in with SSO/SAML.",
    "The user table password column is hashed.",
    "user name and password fields are required",
    # Named fields whose value is a reference, a setting or prose; commands without a password.
    "env:\n- name: API_TOKEN\n  valueFrom:\n    secretKeyRef:\n      name: api-secret\n"
    "      key: token\n- name: LOG_LEVEL\n  value: debug",
    "- name: max_tokens\n  value: 4096",
    "- name: token\n  in: header\n  required: true\n  schema:\n    type: string",
    '<input type="password" name="password" value="">',
    "- name: DB_PASSWORD\n  value: ${DB_PASSWORD}",
    'variable "api_token" { default = null }',
    "sqlcmd -S db -p -Q 'select 1'",
    "ldapsearch -x -W -b dc=acme",
    "unzip -p a.zip notes.txt | less",
    "keytool -list -storepass:env KSPASS",
    "set -euo pipefail",
    "Users are identified by their email address.",
    "echo $DOCKER_PASSWORD | docker login -u me --password-stdin",
    'echo "${{ secrets.TOKEN }}" | docker login --password-stdin',
    "echo hello | grep h",
    "Passwort vergessen? Klicken Sie hier.",
    "the cookie: theme=dark; lang=en",
    "We set a cookie for the session and read X-Amz-Signature from the query.",
    "People write sk-learn but\nthe package is scikit-learn.",
    "The ghp_ prefix\nmarks a GitHub token.",
    # Near misses of a wrapped JWT, URL credentials with a slash, tables, seed phrases,
    # bare key bodies and passwords in prose.
    "A JWT is eyJ-header. eyJ-payload. signature, joined by dots.",
    "Browse https://medium.com:443/@acme/post-1 or https://host:8080/users/@me today.",
    "pull docker://ubuntu:jammy/x@sha256:0123 and git+ssh://git@github.com:org/repo@v1.0",
    "http://localhost:8080 or admin@example.com, postgres://db:5432/app then ping @ops",
    "| name | type |\n|------|------|\n| token | string |\n| password | string |",
    "| Token | Meaning |\n| :-- | --- |\n| `%d` | a digit |\n| `%s` | a string |",
    "| field | password |\n|---|---|\n| required | yes |\n| storage | bcrypt |\n"
    "| reset | `${RESET_URL}` |",
    "| Option | Password policy |\n|---|---|\n| min length | twelve |",
    "token: |\n  The token the CI uses to publish;\n  rotate it yearly.\nname: x",
    'password = (\n    "Enter your password"\n)\nAPI_KEY = (\n    settings.API_KEY\n)',
    'token = """\n    Returns the token.\n"""\nsecret: |\n  {{ .Values.secret }}',
    '"token":\n  null,\n"api_key":\n  "${API_KEY}"',
    "| key | value |\n|---|---|\n| password | required |\n| token | see the vault |\n"
    "| api key | `${API_KEY}` |\n| password | - |\n| password | string |",
    "the mnemonic for this instruction is MOV and the seed phrase is never typed in chat",
    "mnemonic: the assembly mnemonic that names the opcode when the instruction runs goes here",
    "Seed phrase: write the words down on paper and keep them in a safe place at home",
    "The certificate:\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ",
    "pass the test, then pass it to the reviewer; the second pass is 2x slower",
    "the boarding pass is ready and my pass is in the drawer",
    "the token needs admin:read and repo:write scopes; kubectl uses system:admin:dev",
    "root:x:0:0:root:/root:/bin/bash",
    "login localhost:8080 and credentials aws:prod-2 for the staging profile",
)
