#!/usr/bin/env python3
"""openapi_lint_test.py — api/openapi.json as a tool and an integrator read it: `redocly lint`
(Redocly's recommended rules, api/redocly.yaml) finds no error and no warning, `ErrorBody.code`
is exactly the error codes of MV_CODE_TABLE, the `webhooks` section describes every call missive
makes, and the document is kept in the form the generators write.

@redocly/cli is an npm dev dependency pinned by api/package-lock.json; this test installs it with
`npm ci` when api/node_modules does not match the lock (node and npm come from scripts/deps).
Prints "N passed, M failed"."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
API = os.path.join(ROOT, "api")
DOC_PATH = os.path.join(API, "openapi.json")
passed = failed = 0

# Every outgoing call: name in `webhooks` → (method, request body schema or None).
OUTGOING = {
    "actionHandler": ("post", "ActionWebhook"),
    "prepare": ("post", "PrepareWebhook"),
    "paymentCreate": ("post", "PaymentCreateWebhook"),
    "paymentSession": ("post", "PaymentSessionWebhook"),
    "sagaStep": ("post", "SagaStepWebhook"),
    "sagaCompensation": ("post", "SagaCompensationWebhook"),
    "channelDelivery": ("post", "ChannelDelivery"),
    "emailWebhook": ("post", "EmailWebhook"),
    "directoryLookup": ("get", None),
}


def result(name, problems):
    global passed, failed
    if problems:
        failed += 1
        for p in problems:
            sys.stderr.write("FAIL %s: %s\n" % (name, p))
    else:
        passed += 1
        print("ok %s" % name)


def install_linter():
    """npm ci in api/ unless node_modules already matches package-lock.json."""
    lock = os.path.join(API, "package-lock.json")
    stamp = os.path.join(API, "node_modules", ".lock-installed")
    if os.path.exists(stamp) and open(stamp, "rb").read() == open(lock, "rb").read():
        return []
    p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=API,
                       capture_output=True, text=True)
    if p.returncode != 0:
        return ["npm ci in api/ failed: %s" % (p.stdout + p.stderr).strip()[-2000:]]
    open(stamp, "wb").write(open(lock, "rb").read())
    return []


def redocly_lint_finds_no_error_and_no_warning():
    problems = install_linter()
    if problems:
        return problems
    redocly = os.path.join(API, "node_modules", ".bin", "redocly")
    p = subprocess.run([redocly, "lint", "openapi.json", "--format=json"], cwd=API, capture_output=True,
                       text=True, env=dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true"))
    try:
        report = json.loads(p.stdout)
    except ValueError:
        return ["redocly lint did not answer JSON (rc %d): %s" % (p.returncode, (p.stdout + p.stderr)[-2000:])]
    totals = report.get("totals", {})
    problems = ["%s %s at %s: %s" % (x.get("severity"), x.get("ruleId"), x["location"][0].get("pointer"), x.get("message"))
                for x in report.get("problems", []) if x.get("ignored") is not True]
    if totals.get("errors") or totals.get("warnings") or p.returncode != 0:
        problems.append("redocly lint: %s errors, %s warnings (rc %d)" % (totals.get("errors"), totals.get("warnings"),
                                                                        p.returncode))
    print("redocly lint: %d errors, %d warnings, %d ignored (each named in api/.redocly.lint-ignore.yaml)"
          % (totals.get("errors", 0), totals.get("warnings", 0), totals.get("ignored", 0)))
    return problems


def error_table():
    """{code: status} of MV_CODE_TABLE's errors (status ≥ 400), read from the header here."""
    src = open(os.path.join(ROOT, "include", "missive", "error.h"), encoding="utf-8").read()
    start = src.index("#define MV_CODE_TABLE(X)")
    body = src[start:src.index("\n\n", start)]
    codes = {}
    for name, status in re.findall(r'X\(\s*MV_\w+\s*,\s*"([a-z0-9_]+)"\s*,\s*(\d+)\s*\)', body):
        if int(status) >= 400:
            codes.setdefault(name, int(status))
    return codes


def error_body_code_is_the_enum_of_the_error_table_and_every_response_names_known_codes():
    doc = json.load(open(DOC_PATH, encoding="utf-8"))
    table = error_table()
    code = doc["components"]["schemas"]["ErrorBody"]["properties"]["code"]
    problems = []
    if sorted(code.get("enum", [])) != sorted(table):
        problems.append("ErrorBody.code.enum %s is not the table's %s (run scripts/gen-error-table)" % (
            sorted(set(code.get("enum", [])) ^ set(table)), len(table)))
    # each error response narrows the code to some of them, under its own status
    for name, resp in doc["components"]["responses"].items():
        schema = resp.get("content", {}).get("application/json", {}).get("schema", {})
        narrowed = schema.get("properties", {}).get("error", {}).get("properties", {}).get("code", {}).get("enum", [])
        m = re.match(r"E(\d{3})_", name)
        for c in narrowed:
            if c not in table:
                problems.append("response %s names the code %s, which the error table lacks" % (name, c))
            elif m and table[c] != int(m.group(1)):
                problems.append("response %s names %s, whose status is %d" % (name, c, table[c]))
    return problems


def webhooks_describe_every_call_missive_makes_with_its_signature_headers():
    doc = json.load(open(DOC_PATH, encoding="utf-8"))
    hooks = doc.get("webhooks", {})
    schemas = doc["components"]["schemas"]
    params = doc["components"]["parameters"]
    problems = ["webhooks lacks %s" % n for n in OUTGOING if n not in hooks]
    problems += ["webhooks.%s is not a call listed here" % n for n in hooks if n not in OUTGOING]
    for name, (method, body) in OUTGOING.items():
        op = hooks.get(name, {}).get(method)
        if not op:
            problems.append("webhooks.%s has no %s operation" % (name, method))
            continue
        headers = set()
        for p in op.get("parameters", []):
            p = params[p["$ref"].split("/")[-1]] if "$ref" in p else p
            if p.get("in") == "header":
                headers.add(p["name"].lower())
        for h in ("webhook-id", "webhook-timestamp", "webhook-signature", "x-missive-signature"):
            if h not in headers:
                problems.append("webhooks.%s does not describe the %s header" % (name, h))
        if method == "post" and "idempotency-key" not in headers:
            problems.append("webhooks.%s does not describe Idempotency-Key" % name)
        if body:
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
            if ref != "#/components/schemas/" + body or body not in schemas:
                problems.append("webhooks.%s's body is %s, not %s" % (name, ref, body))
            elif not schemas[body].get("required"):
                problems.append("%s lists no required fields" % body)
        if not any(k.startswith("2") for k in op.get("responses", {})):
            problems.append("webhooks.%s says nothing of a 2xx answer" % name)
    # the channel delivery as it is fixed for receivers
    delivery = schemas.get("ChannelDelivery", {})
    want = ["channel", "deliveryId", "to", "messageId", "templateCd", "category", "kind", "content", "links"]
    if sorted(delivery.get("required", [])) != sorted(want):
        problems.append("ChannelDelivery requires %s, not %s" % (delivery.get("required"), want))
    if delivery.get("properties", {}).get("kind", {}).get("enum") != ["message", "reminder", "digest"]:
        problems.append("ChannelDelivery.kind is not message|reminder|digest")
    return problems


def the_document_is_kept_as_the_generators_write_it():
    text = open(DOC_PATH, encoding="utf-8").read()
    doc = json.loads(text)
    problems = []
    if json.dumps(doc, indent=2, ensure_ascii=False) + "\n" != text:
        problems.append("api/openapi.json is not formatted as json.dumps(indent=2, ensure_ascii=False) writes it "
                        "(scripts/gen-error-table rewrites the whole document that way: run it)")
    for script in ("gen-error-table", "sync-version"):
        p = subprocess.run([os.path.join(ROOT, "scripts", script), "--check"], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("scripts/%s --check: %s" % (script, (p.stdout + p.stderr).strip()[:2000]))
    if doc.get("openapi") != "3.1.0":
        problems.append("openapi is %s, not 3.1.0 (webhooks need 3.1)" % doc.get("openapi"))
    return problems


def main():
    for fn in (redocly_lint_finds_no_error_and_no_warning,
               error_body_code_is_the_enum_of_the_error_table_and_every_response_names_known_codes,
               webhooks_describe_every_call_missive_makes_with_its_signature_headers,
               the_document_is_kept_as_the_generators_write_it):
        try:
            problems = fn()
        except Exception as e:  # a failed command or a missing key is a failed check
            problems = ["%s: %s" % (type(e).__name__, e)]
        result(fn.__name__, problems)
    print("openapi_lint_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
