"""Token formats the watcher's redaction recognises on top of ``detect-secrets``' own detectors.

Why a table of our own: ``detect-secrets`` (1.5.0, the newest release) predates several current formats
(GitHub fine-grained ``github_pat_`` PATs, OpenAI ``sk-proj-`` keys: Yelp/detect-secrets#894) and its keyword
detector only sees quoted assignments. No maintained Python package ships a current rule set that works
offline (the gitleaks packages on PyPI wrap or download the Go binary). So every entry below is a *prefix-anchored*
format written for this project, each naming where the format is documented: the gitleaks rule of the same id in
``config/gitleaks.toml`` (gitleaks/gitleaks, commit b58d3f1, 2026-07-22; MIT) and, where there is one, the
provider's own page. The patterns are our own and deliberately a little looser than gitleaks' (no fixed length
where providers changed lengths, no checksum suffix required): a false positive costs a ``[KEY]`` in a note, a
false negative costs a leaked credential.

Keeping it current (docs/security.md repeats this): when a provider announces a new key format, add a row with
its source; the corpus test ``tests/test_watch_redaction_corpus.py`` generates a fake token for every row and
fails if one survives a watcher run, and lists the kinds caught. Compare with the newest gitleaks.toml when
``detect-secrets`` or gitleaks release (ids below match gitleaks' so the diff is mechanical).

Each rule is ``(kind, regex, source)``; the regex's whole match is the secret, or its group ``v`` when it has one
(a credential-bearing URL parameter: ``sig=`` is kept, its value replaced).

Two kinds of rows: vendor-prefixed tokens (the prefix names the vendor: ``key-`` Mailgun, ``ATATT3`` Atlassian,
``sbp_`` Supabase …) and credential-bearing URL parameters — a signed or authenticated URL carries its credential
in a query parameter whose *name* is the clue, whatever the value looks like (Azure SAS ``sig=``, AWS SigV4
``X-Amz-Signature=`` / ``X-Amz-Credential=`` / ``X-Amz-Security-Token=``, Google ``X-Goog-Signature=``, OAuth 2.0
``access_token=`` / ``code=``, ``?key=`` / ``?token=`` API keys); the signature names are caught anywhere (also
in a file name that holds a pasted URL), the generic ones after ``?``, ``&`` or ``;``.
"""

from __future__ import annotations

import re

__all__ = ["ASSIGNMENT", "KEYWORDS", "NOT_SECRET_VALUES", "RULES", "SECRET_NAMES", "compiled"]

_GL = "gitleaks rule "
# (kind, regex, source). Kinds are gitleaks' rule ids where one exists.
RULES: list[tuple[str, str, str]] = [
    ("openai-api-key", r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}",
     _GL + "openai-api-key; platform.openai.com/docs/api-reference/authentication (project keys sk-proj-)"),
    ("openai-api-key-legacy", r"\bsk-[A-Za-z0-9]{32,}\b", _GL + "openai-api-key (legacy sk-…T3BlbkFJ… form)"),
    ("anthropic-api-key", r"\bsk-ant-(?:api|admin|sid)\d\d-[A-Za-z0-9_-]{20,}",
     _GL + "anthropic-api-key, anthropic-admin-api-key"),
    ("github-fine-grained-pat", r"\bgithub_pat_[A-Za-z0-9_]{22,}",
     _GL + "github-fine-grained-pat; github.blog 2022-10-18 fine-grained personal access tokens"),
    ("github-token", r"\bgh[pousr]_[A-Za-z0-9]{30,}",
     _GL + "github-pat, github-oauth, github-app-token, github-refresh-token; github.blog 2021-04-05 token format"),
    ("gitlab-token", r"\bgl(?:pat|ptt|rt|dt|ft|imt|agent|oas|soat|cbt|feed)-[A-Za-z0-9_.-]{20,}",
     _GL + "gitlab-pat, gitlab-ptt, gitlab-runner-authentication-token, gitlab-deploy-token …; "
     "docs.gitlab.com/ee/security/token_overview.html (token prefixes)"),
    ("aws-access-token", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b", _GL + "aws-access-token"),
    ("aws-bedrock-api-key", r"\bABSK[A-Za-z0-9+/]{100,}={0,2}", _GL + "aws-amazon-bedrock-api-key-long-lived"),
    ("gcp-api-key", r"\bAIza[A-Za-z0-9_-]{35}", _GL + "gcp-api-key; cloud.google.com/docs/authentication/api-keys"),
    ("google-oauth-secret", r"\bGOCSPX-[A-Za-z0-9_-]{28}", "Google OAuth client secrets (GOCSPX- prefix, 2021)"),
    ("slack-token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}", _GL + "slack-bot-token, slack-user-token, slack-legacy-token"),
    ("slack-app-token", r"\bxapp-\d-[A-Za-z0-9-]{20,}", _GL + "slack-app-token"),
    ("slack-webhook-url", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
     _GL + "slack-webhook-url"),
    ("stripe-access-token", r"\b(?:sk|rk|pk|whsec)_(?:test|live|prod)_[A-Za-z0-9]{10,}",
     _GL + "stripe-access-token; docs.stripe.com/keys"),
    ("stripe-webhook-secret", r"\bwhsec_[A-Za-z0-9]{24,}", "docs.stripe.com/webhooks (signing secret whsec_)"),
    ("huggingface-access-token", r"\bhf_[A-Za-z0-9]{30,}", _GL + "huggingface-access-token"),
    ("huggingface-organization-api-token", r"\bapi_org_[A-Za-z0-9]{30,}", _GL + "huggingface-organization-api-token"),
    ("npm-access-token", r"\bnpm_[A-Za-z0-9]{36}\b", _GL + "npm-access-token"),
    ("pypi-upload-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}", _GL + "pypi-upload-token"),
    ("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", _GL + "digitalocean-pat, -access-token, -refresh-token"),
    ("databricks-api-token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b", _GL + "databricks-api-token"),
    ("doppler-api-token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", _GL + "doppler-api-token"),
    ("linear-api-key", r"\blin_(?:api|oauth)_[A-Za-z0-9]{40}\b", _GL + "linear-api-key"),
    ("notion-api-token", r"\b(?:ntn_\d{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})\b",
     _GL + "notion-api-token; developers.notion.com (integration secrets, old secret_ form)"),
    ("perplexity-api-key", r"\bpplx-[A-Za-z0-9]{48}\b", _GL + "perplexity-api-key"),
    ("groq-api-key", r"\bgsk_[A-Za-z0-9]{52}\b", "console.groq.com/docs (API keys gsk_)"),
    ("xai-api-key", r"\bxai-[A-Za-z0-9]{60,}", "docs.x.ai (API keys xai-)"),
    ("replicate-api-token", r"\br8_[A-Za-z0-9]{37}\b", "replicate.com/docs (API tokens r8_)"),
    ("sendgrid-api-token", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b", _GL + "sendgrid-api-token"),
    ("mailchimp-api-key", r"\b[a-f0-9]{32}-us\d{1,2}\b", _GL + "mailchimp-api-key"),
    ("twilio-api-key", r"\bSK[a-f0-9]{32}\b", _GL + "twilio-api-key"),
    ("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", _GL + "shopify-access-token, shopify-shared-secret …"),
    ("square-access-token", r"\b(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_-]{22,60}", _GL + "square-access-token"),
    ("postman-api-token", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", _GL + "postman-api-token"),
    ("pulumi-api-token", r"\bpul-[a-f0-9]{40}\b", _GL + "pulumi-api-token"),
    ("sentry-token", r"\bsntry[us]_[A-Za-z0-9+/=_]{40,}", _GL + "sentry-user-token, sentry-org-token"),
    ("grafana-token", r"\b(?:glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
     _GL + "grafana-cloud-api-token, grafana-service-account-token"),
    ("hashicorp-tf-api-token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}", _GL + "hashicorp-tf-api-token"),
    ("vault-token", r"\bhv[sb]\.[A-Za-z0-9_-]{24,}", _GL + "vault-service-token, vault-batch-token"),
    ("age-secret-key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b", _GL + "age-secret-key"),
    ("1password-service-account-token", r"\bops_eyJ[A-Za-z0-9+/]{100,}={0,3}", _GL + "1password-service-account-token"),
    ("heroku-api-key-v2", r"\bHRKU-AA[A-Za-z0-9_-]{58}\b", _GL + "heroku-api-key-v2"),
    ("rubygems-api-token", r"\brubygems_[a-f0-9]{48}\b", _GL + "rubygems-api-token"),
    ("telegram-bot-api-token", r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b", _GL + "telegram-bot-api-token"),
    ("azure-ad-client-secret", r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", _GL + "azure-ad-client-secret"),
    ("azure-storage-key", r"AccountKey=[A-Za-z0-9+/]{86}==", "learn.microsoft.com azure storage connection strings"),
    ("microsoft-teams-webhook", r"\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{40,}", _GL + "microsoft-teams-webhook"),
    ("jwt", r"\bey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*", _GL + "jwt; RFC 7519 (all three segments)"),
    ("url-credentials", r"(?<=://)[^/\s:@]{1,64}:[^/\s@]{3,}(?=@)", "RFC 3986 §3.2.1 userinfo (user:password@host)"),
    ("mailgun-private-api-token", r"\bkey-[a-f0-9]{32}\b",
     _GL + "mailgun-private-api-token; documentation.mailgun.com API keys (private keys key-…)"),
    ("mailgun-pub-key", r"\bpubkey-[a-f0-9]{32}\b", _GL + "mailgun-pub-key"),
    ("atlassian-api-token", r"\bATATT3[A-Za-z0-9_=-]{60,}",
     _GL + "atlassian-api-token; support.atlassian.com API tokens (ATATT3… since 2023)"),
    ("atlassian-context-token", r"\bATCTT3[A-Za-z0-9_=-]{60,}", "Atlassian scoped/Connect tokens (ATCTT3…)"),
    ("supabase-token", r"\b(?:sbp_(?:v0_)?[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})\b",
     "supabase.com/docs: personal access tokens sbp_…, secret API keys sb_secret_… (2025)"),
    ("url-signature-parameter",
     r"(?i)(?<![A-Za-z0-9_-])(?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token"
     r"|x-goog-signature|x-goog-credential)=(?P<v>[^&#\s\"'<>|]{4,})",
     "signed-URL parameters: Azure SAS sig= (learn.microsoft.com: create a service SAS, 'sig'), AWS SigV4 presigned "
     "URLs X-Amz-Signature/Credential/Security-Token (docs.aws.amazon.com), Google signed URLs X-Goog-Signature"),
    ("url-credential-parameter",
     r"(?i)[?&;](?:token|access_token|id_token|refresh_token|auth|auth_token|api_key|apikey|api-key|key|secret"
     r"|client_secret|password|passwd|pwd|code)=(?P<v>[^&#\s\"'<>|]{4,})",
     "credential-bearing query parameters: OAuth 2.0 access_token / code (RFC 6749 §4.1.2, §4.2.2), API keys "
     "?key= (Google APIs), ?token= / ?api_key= (many providers)"),
]

#: names of settings whose value is a secret (an assignment ``NAME = value`` / ``NAME: value`` to a name *ending*
#: in one of these is redacted whatever the value looks like; ours, after detect-secrets' keyword list and
#: gitleaks' generic-api-key keywords)
SECRET_NAMES = (r"password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
                r"|credentials?|authorization|bearer")
#: an assignment to a secret-named setting, quoted or not: group ``v`` is the value (the match starts at the secret
#: word, so a prefix such as ``aws_secret_`` needs no scanning). Values of < 4 characters and a few non-secret words
#: (``none``, ``null``, ``true``, ``false``, ``required`` …) are left alone.
ASSIGNMENT = re.compile(
    r"(?i)(?:" + SECRET_NAMES + r")(?![A-Za-z0-9])[\"'\]]?[ \t]*"
    r"(?::=|=>|==|=|:)[ \t]*(?:(?:bearer|basic|token)[ \t]+)?[\"'`]?(?P<v>[^\s\"'`,;]{4,})")
NOT_SECRET_VALUES = frozenset({"none", "null", "nil", "true", "false", "undefined", "required", "optional",
                               "string", "empty", "unset", "todo", "example", "[key]"})


#: literals (lower case) of which one must occur in a text for a rule to be tried (gitleaks' "keywords" idea:
#: one substring search instead of a regex scan per rule); a rule not listed here is always tried
KEYWORDS: dict[str, tuple[str, ...]] = {
    "openai-api-key": ("sk-",), "openai-api-key-legacy": ("sk-",), "anthropic-api-key": ("sk-ant-",),
    "github-fine-grained-pat": ("github_pat_",), "github-token": ("gh",), "gitlab-token": ("gl",),
    "aws-access-token": ("a3t", "akia", "asia", "abia", "acca"), "aws-bedrock-api-key": ("absk",),
    "gcp-api-key": ("aiza",), "google-oauth-secret": ("gocspx-",), "slack-token": ("xox",),
    "slack-app-token": ("xapp-",), "slack-webhook-url": ("hooks.slack.com",), "stripe-access-token": ("_test_",
    "_live_", "_prod_"), "stripe-webhook-secret": ("whsec_",), "huggingface-access-token": ("hf_",),
    "huggingface-organization-api-token": ("api_org_",), "npm-access-token": ("npm_",),
    "pypi-upload-token": ("pypi-",), "digitalocean-token": ("_v1_",), "databricks-api-token": ("dapi",),
    "doppler-api-token": ("dp.",), "linear-api-key": ("lin_",), "notion-api-token": ("ntn_", "secret_"),
    "perplexity-api-key": ("pplx-",), "groq-api-key": ("gsk_",), "xai-api-key": ("xai-",),
    "replicate-api-token": ("r8_",), "sendgrid-api-token": ("sg.",), "mailchimp-api-key": ("-us",),
    "twilio-api-key": ("sk",), "shopify-token": ("shp",), "square-access-token": ("eaaa", "sq0"),
    "postman-api-token": ("pmak-",), "pulumi-api-token": ("pul-",), "sentry-token": ("sntry",),
    "grafana-token": ("glc_", "glsa_"), "hashicorp-tf-api-token": (".atlasv1.",), "vault-token": ("hvs.", "hvb."),
    "age-secret-key": ("age-secret-key-1",), "1password-service-account-token": ("ops_",),
    "heroku-api-key-v2": ("hrku-",), "rubygems-api-token": ("rubygems_",), "telegram-bot-api-token": (":aa",),
    "azure-ad-client-secret": ("q~",), "azure-storage-key": ("accountkey=",),
    "microsoft-teams-webhook": ("webhook.office.com",), "jwt": ("ey",), "url-credentials": ("://",),
    "mailgun-private-api-token": ("key-",), "mailgun-pub-key": ("pubkey-",), "atlassian-api-token": ("atatt3",),
    "atlassian-context-token": ("atctt3",), "supabase-token": ("sbp_", "sb_secret_"),
    "url-signature-parameter": ("sig=", "signature=", "x-amz-", "x-goog-"), "url-credential-parameter": ("=",),
}


def compiled() -> list[tuple[str, tuple[str, ...], re.Pattern[str]]]:
    """The rules compiled, in table order: ``(kind, keywords (empty: always try), regex)``."""
    return [(kind, KEYWORDS.get(kind, ()), re.compile(rx)) for kind, rx, _ in RULES]
