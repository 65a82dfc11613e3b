#!/usr/bin/env python3
"""deps_test.py — every program the tests and scripts run is one scripts/deps installs, so `make
test` on a fresh Debian 12 machine needs nothing by hand.

The programs are found where tests start them: the command strings of the C tests (system,
popen, the snprintf'd `cmd`), the argument lists of the Python tests (subprocess, shutil.which,
their run() helpers), the child processes of the JavaScript tests, (Shell scripts are not scanned:
their words cannot be told from programs reliably.) Each must be on this machine (scripts/deps
ran before make test) and come from a package scripts/deps names, a direct dependency of one, or
one Debian installs on every system (Essential: yes, or Priority: required). Prints "N passed, M failed"."""
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
passed = failed = 0

# Words in command position that are no program of a package: shell builtins and keywords, the
# project's own programs and scripts, and placeholders.
NOT_PROGRAMS = {
    "cd", "set", "exec", "exit", "export", "eval", "trap", "wait", "kill", "echo", "printf", "read",
    "test", "true", "false", "command", "shift", "return", "local", "if", "then", "else", "fi",
    "for", "do", "done", "while", "case", "esac", "until", "break", "continue", "unset", ".",
    "missive", "missived", "example", "example-static", "sh",
}


def sources(*patterns):
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            if "node_modules" not in path and os.path.isfile(path):
                yield path


def first_words(command):
    """The program of each simple command in a shell command string."""
    out = []
    for part in re.split(r"&&|\|\||[|;`]|\$\(", command):
        words = part.strip().split()
        while words and (re.match(r"^\w+=", words[0]) or words[0] in ("sudo", "$SUDO", "runuser", "env")):
            words = words[1:]
            # runuser -u USER -- PROGRAM
            while words and (words[0].startswith("-") or words[0] == "postgres"):
                words = words[1:]
        if words:
            word = re.sub(r"^(%s)+", "", words[0])         # "%s%s/pg_ctl" → "/pg_ctl"
            word = word.rsplit("/", 1)[-1] if "/" in word and not word.startswith(("./", "scripts/")) else word
            out.append(word)
    return out


def programs():
    """{program: [where it is run]}"""
    found = {}

    def add(name, where):
        name = name.strip("\"'")
        if re.fullmatch(r"[a-z][a-z0-9_.+-]*", name) and name not in NOT_PROGRAMS:
            found.setdefault(name, []).append(os.path.relpath(where, ROOT))

    for path in sources("tests/**/*.c"):
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r'(?:system|popen)\(\s*"([^"]*)"|snprintf\(\s*cmd\s*,[^,]+,\s*"([^"]*)"', text):
            for w in first_words(m.group(1) or m.group(2)):
                add(w, path)
    for path in sources("tests/**/*.py", "scripts/*"):
        text = open(path, encoding="utf-8", errors="replace").read()
        if not text.startswith("#!/usr/bin/env python3"):
            continue
        for m in re.finditer(r'(?:subprocess\.\w+|shutil\.which|\brun)\(\s*\[?\s*"([^"/ ]+)"', text):
            add(m.group(1), path)
    for path in sources("tests/**/*.mjs", "clients/typescript/test/*.mjs"):
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"(?:spawn|spawnSync|execFile|execFileSync|execSync)\(\s*'([^'/ ]+)'", text):
            add(m.group(1), path)
    return found


# What the shell scripts and the documentation's examples (docs_test runs them) start, which the
# scan above cannot read: kept by hand. `grep -ho '^[a-z][a-z0-9_-]*' ` over the run blocks of
# docs/*.md and tests/**/*.sh lists the candidates.
SHELL_PROGRAMS = {
    "jq": "docs/*.md, scripts/check-installed", "openssl": "docs/http-api.md",
    "curl": "docs/*.md, scripts/check-installed", "sqlite3": "docs/operations.md",
    "python3": "the test scripts", "git": "scripts/build-deb", "dpkg-shlibdeps": "scripts/build-deb",
    "dpkg-architecture": "scripts/build-deb", "strip": "scripts/build-deb", "gzip": "scripts/build-deb",
    "tar": "tests/clients/typescript_test.sh", "mktemp": "the shell tests", "chromium": "tests/browser",
}


def deps_packages():
    """The packages scripts/deps installs: its PKGS and the package side of PROGS."""
    text = open(os.path.join(ROOT, "scripts", "deps"), encoding="utf-8").read()
    pkgs = set(re.search(r'PKGS="([^"]*)"', text).group(1).split())
    progs = re.search(r'PROGS="([^"]*)"', text)
    for pair in (progs.group(1).split() if progs else []):
        pkgs.add(pair.split(":", 1)[1])
    pkgs.update(re.findall(r'browser="\$browser (\S+)"', text))
    return pkgs


def owner(path):
    """The Debian package holding path, following the /bin → /usr/bin merge."""
    for p in (path, os.path.realpath(path), path.replace("/usr/bin/", "/bin/"), path.replace("/bin/", "/usr/bin/")):
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if r.returncode == 0 and not line.startswith("diversion "):
                return line.split(":", 1)[0].split(",")[0].strip()
    return None


def with_dependencies(pkgs):
    """pkgs and the packages they depend on directly (build-essential brings make, pkg-config
    pkgconf, postgresql postgresql-15), as installed here."""
    out = set(pkgs)
    for pkg in pkgs:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", pkg], capture_output=True, text=True)
        for alt in re.split(r"[,|]", r.stdout):
            name = alt.strip().split(" ")[0].split(":")[0]
            if name:
                out.add(name)
    return out


def always_installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Essential} ${Priority}", pkg], capture_output=True, text=True)
    return r.stdout.startswith("yes") or r.stdout.endswith(" required")


def locate(name):
    path = shutil.which(name)
    if path:
        return path
    # PostgreSQL's server programs live in its bindir, off PATH (the tests look there too)
    for path in sorted(glob.glob("/usr/lib/postgresql/*/bin/" + name), reverse=True):
        return path
    return None


def every_program_the_tests_run_is_installed_by_scripts_deps():
    found = programs()
    for name, where in SHELL_PROGRAMS.items():
        found.setdefault(name, []).append(where)
    problems = []
    wanted = with_dependencies(deps_packages())
    for known in ("curl", "promtool", "lintian", "pg_ctl", "node", "npm", "mandoc", "unshare"):
        if known not in found:
            problems.append("the scan no longer finds %s, which tests run: the scan is broken" % known)
    for name, where in sorted(found.items()):
        if os.path.exists(os.path.join(ROOT, "scripts", name)) or name.endswith((".py", ".sh", ".mjs")):
            continue  # the project's own scripts
        path = locate(name)
        if not path:
            problems.append("%s (run by %s) is not installed: scripts/deps must install it" % (name, where[0]))
            continue
        pkg = owner(path)
        if pkg is None:
            # not from a Debian package (e.g. Node.js of the machine image): deps installs it
            # when missing only if it names it
            if not re.search(r"\b%s:" % re.escape(name), open(os.path.join(ROOT, "scripts", "deps")).read()):
                problems.append("%s (run by %s) is in no Debian package and scripts/deps does not name it" % (
                    name, where[0]))
            continue
        if pkg not in wanted and not always_installed(pkg):
            problems.append("%s (run by %s) comes from %s, which scripts/deps does not install" % (name, where[0], pkg))
    print("deps_test: %d programs run by tests and scripts: %s" % (len(found), " ".join(sorted(found))))
    return problems


def main():
    global passed, failed
    for fn in (every_program_the_tests_run_is_installed_by_scripts_deps,):
        try:
            problems = fn()
        except Exception as e:  # a failed command is a failed check
            problems = ["%s: %s" % (type(e).__name__, e)]
        if problems:
            failed += 1
            for p in problems:
                sys.stderr.write("FAIL %s: %s\n" % (fn.__name__, p))
        else:
            passed += 1
            print("ok %s" % fn.__name__)
    print("deps_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
