#!/usr/bin/env python3
"""man_test.py — the manual pages keep up with the programs.

The lists come from the code, never from this file: the configuration keys from
scripts/config-keys (which reads src/cmd/config.c's key tables), the subcommands and flags from
the usage the freshly built `missive` and `missived` print. Pages are rendered with mandoc, so a
key hidden in a comment does not count, and `mandoc -Tlint` must find nothing to warn about.
Prints "N passed, M failed"."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
MAN = os.path.join(ROOT, "man")
passed = failed = 0


def result(name, problems):
    global passed, failed
    if problems:
        failed += 1
        for p in problems:
            sys.stderr.write("FAIL %s: %s\n" % (name, p))
    else:
        passed += 1
        print("ok %s" % name)


def rendered(page):
    out = subprocess.run(["mandoc", "-Tascii", os.path.join(MAN, page)], capture_output=True,
                         text=True, check=True).stdout
    return re.sub(r".\x08", "", out)  # overstrike (bold, underline) to plain text


def usage(*args):
    p = subprocess.run(list(args), capture_output=True, text=True)
    return p.stdout + p.stderr


def words(text):
    return set(re.findall(r"[A-Za-z0-9_.-]+", text))


def main():
    for page in ("missive.1", "missived.8", "missive.json.5"):
        p = subprocess.run(["mandoc", "-Tlint", "-W", "warning", os.path.join(MAN, page)],
                           capture_output=True, text=True)
        result("%s is clean for mandoc -Tlint" % page,
               [] if p.returncode == 0 and not (p.stdout + p.stderr).strip() else [(p.stdout + p.stderr).strip()])

    keys = subprocess.run([os.path.join(ROOT, "scripts", "config-keys")], capture_output=True,
                          text=True)
    key_list = keys.stdout.split()
    page = words(rendered("missive.json.5"))
    result("every configuration key the daemon accepts is in missive.json.5",
           ([keys.stderr.strip()] if keys.returncode else []) +
           (["scripts/config-keys found no keys"] if len(key_list) < 10 else []) +
           ["key %s is not documented" % k for k in key_list if k not in page])

    cli = usage(os.path.join(BUILD, "missive"), "--help")
    commands = re.findall(r"^\s+missive ((?:[a-z]+ ?)+)", cli, flags=re.M)
    commands = [c.strip() for c in commands]
    text1 = rendered("missive.1")
    flat1 = " ".join(text1.split())
    result("every subcommand of missive is in missive.1",
           (["missive --help lists no commands"] if len(commands) < 5 else []) +
           ["subcommand \"missive %s\" is not documented" % c for c in commands
            if "missive " + c not in flat1])

    flags = set(re.findall(r"--[a-z][a-z-]*", cli))
    for c in commands:  # each subcommand's own usage (printed for an unknown flag)
        flags |= set(re.findall(r"--[a-z][a-z-]*", usage(os.path.join(BUILD, "missive"),
                                                           *c.split(), "--no-such-flag")))
    flags.discard("--no-such-flag")
    page1 = words(text1)
    result("every flag of missive is in missive.1",
           ["flag %s is not documented" % f for f in sorted(flags) if f not in page1])

    dflags = set(re.findall(r"--[a-z][a-z-]*", usage(os.path.join(BUILD, "missived"), "--help")))
    page8 = words(rendered("missived.8"))
    result("every flag of missived is in missived.8",
           (["missived --help lists no flags"] if len(dflags) < 3 else []) +
           ["flag %s is not documented" % f for f in sorted(dflags) if f not in page8])

    print("man_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
