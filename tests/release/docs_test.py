#!/usr/bin/env python3
"""docs_test.py — the documentation's commands are run, or say that they are only illustrative.

Every fenced shell block (```sh, ```shell, ```bash, ```console) of README.md, docs/*.md and
bench/RESULTS.md must be preceded by one of these markers (blank lines in between are allowed):

  <!-- illustrative -->   not run: it needs a server, takes minutes, or changes the machine
  <!-- run -->            run in a fresh scratch directory (examples/ and build/ linked into it,
                          the freshly built `missive` and `missived` first on PATH)
  <!-- run: daemon -->    the same, against a missived started from examples/missive.json on a
                          free port (127.0.0.1:8080 in the block is replaced by that address);
                          the block runs twice in a row on the same store

A block whose lines start with `$ ` is a transcript: each command runs (a trailing `\\` continues
it on the next line) and what it prints, stdout and stderr together, must equal the lines after
it. Other blocks run as one bash script (`set -eo pipefail`) that must exit 0; when the block is
followed by `<!-- output -->` and a ```text block, its output must equal that block. In expected
output, `…` stands for any text within a line and a 24-hex-digit message id matches any such id.

Also checked: README.md is at most 250 lines, a transcript command's output ends with a newline,
README.md, docs/*.md and man/ mention no DESIGN, SEMANTICS or issue number, and the error table of docs/http-api.md is the one
scripts/gen-error-table generates from MV_CODE_TABLE. Prints "N passed, M failed". """
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
SHELL_LANGS = {"sh", "shell", "bash", "console"}
MARKER = re.compile(r"^\s*<!--\s*(illustrative|run(?::\s*daemon)?|output)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
HEXID = re.compile(r"[0-9a-f]{24}")

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


def doc_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "bench", "RESULTS.md")]
    docs = os.path.join(ROOT, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [f for f in files if os.path.exists(f)]


# Users have neither the design notes nor the issue tracker's numbering: the docs speak in their terms.
INTERNAL_WORDS = re.compile(r"\bDESIGN\b|\bSEMANTICS\b|\bissues?\s*#?\d+", re.I)


def user_doc_files():
    man = os.path.join(ROOT, "man")
    pages = sorted(os.path.join(man, f) for f in os.listdir(man)) if os.path.isdir(man) else []
    return [f for f in doc_files() if not f.endswith(os.path.join("bench", "RESULTS.md"))] + pages


def blocks(path):
    """Yields (line number, language, marker or None, text, output block text or None)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    marker, i, found = None, 0, []
    while i < len(lines):
        m = MARKER.match(lines[i])
        f = FENCE.match(lines[i])
        if m:
            marker = m.group(1).replace(" ", "")
        elif f and f.group(2):
            indent, lang, start = f.group(1), f.group(2), i + 1
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
            found.append([start, lang, marker, "\n".join(body) + "\n", None])
            if marker == "output" and len(found) > 1 and found[-2][4] is None:
                found[-2][4] = found[-1][3]
            marker, i = None, j
        elif lines[i].strip():
            marker = None
        i += 1
    return found


def expect_match(expected, actual):
    """None when the outputs agree, else a description of the first difference."""
    exp = expected.rstrip("\n").split("\n") if expected.strip() else []
    act = actual.rstrip("\n").split("\n") if actual.strip() else []
    for n in range(max(len(exp), len(act))):
        e = exp[n] if n < len(exp) else None
        a = act[n] if n < len(act) else None
        if e is None or a is None:
            return "line %d: expected %r, got %r" % (n + 1, e, a)
        pattern = "".join(".*" if part == "…" else re.escape(part) for part in re.split("(…)", e))
        pattern = HEXID.sub("[0-9a-f]{24}", pattern)
        if not re.fullmatch(pattern, a):
            return "line %d: expected %r, got %r" % (n + 1, e, a)
    return None


def scratch():
    d = tempfile.mkdtemp(prefix="missive-docs-")
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(d, "examples"))
    os.symlink(BUILD, os.path.join(d, "build"))
    return d


def env_for(d):
    env = dict(os.environ)
    env["PATH"] = BUILD + os.pathsep + env.get("PATH", "")
    env["HOME"] = d
    return env


def run_transcript(text, d):
    cmds, cur = [], None
    for ln in text.rstrip("\n").split("\n"):
        if cur is not None and cur[0].endswith("\\"):
            cur[0] += "\n" + ln
        elif ln.startswith("$ "):
            cur = [ln[2:], []]
            cmds.append(cur)
        elif cur is not None:
            cur[1].append(ln)
        else:
            return ["output before the first command: %r" % ln]
    script = "exec 2>&1\n"
    for n, (cmd, _) in enumerate(cmds):
        script += "%s\nprintf '\\n@@doc-%d@@\\n'\n" % (cmd, n)
    p = subprocess.run(["bash", "-c", script], cwd=d, env=env_for(d), capture_output=True,
                       text=True, timeout=120)
    out = p.stdout
    problems = []
    for n, (cmd, exp) in enumerate(cmds):
        mark = "\n@@doc-%d@@\n" % n
        if mark not in out:
            return problems + ["`%s` did not finish (output so far: %r)" % (cmd, out[-400:])]
        got, out = out.split(mark, 1)
        if got and not got.endswith("\n"):  # on a terminal the next prompt would run into it
            problems.append("`%s`: its output does not end with a newline (add `; echo`)"
                            % cmd.split("\n")[0])
        diff = expect_match("\n".join(exp), got)
        if diff:
            problems.append("`%s`: %s" % (cmd.split("\n")[0], diff))
    return problems


def run_script(text, d, expected, env=None):
    p = subprocess.run(["bash", "-c", "set -eo pipefail\n" + text], cwd=d, env=env or env_for(d),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 0:
        return ["exit status %d; output:\n%s" % (p.returncode, p.stdout[-2000:])]
    if expected is not None:
        diff = expect_match(expected, p.stdout)
        if diff:
            return ["output differs: %s; output:\n%s" % (diff, p.stdout)]
    return []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_daemon(d):
    port = free_port()
    conf = open(os.path.join(ROOT, "examples", "missive.json"), encoding="utf-8").read()
    conf = conf.replace('"127.0.0.1:8080"', '"127.0.0.1:%d"' % port)
    conf = re.sub(r'"sqlite:[^"]*"', '"sqlite:%s/missive.db"' % d, conf)
    conf = conf.replace('"templates/"', '"%s/examples/templates/"' % ROOT)
    conf = conf.replace('"sagas/"', '"%s/examples/sagas/"' % ROOT)
    path = os.path.join(d, "missive.json")
    open(path, "w", encoding="utf-8").write(conf)
    log = open(os.path.join(d, "missived.log"), "w")
    proc = subprocess.Popen([os.path.join(BUILD, "missived"), "--config", path], cwd=d,
                            stdout=log, stderr=log)
    for _ in range(100):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1).read()
            return proc, port
        except Exception:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError("missived did not start: " + open(os.path.join(d, "missived.log")).read())


def run_daemon_block(text, d, expected):
    proc, port = start_daemon(d)
    try:
        text = text.replace("127.0.0.1:8080", "127.0.0.1:%d" % port)
        text = text.replace("localhost:8080", "127.0.0.1:%d" % port)
        problems = []
        for run in (1, 2):
            problems += ["run %d: %s" % (run, p) for p in run_script(text, d, expected)]
        return problems
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    for path in doc_files():
        rel = os.path.relpath(path, ROOT)
        unmarked = []
        for line, lang, marker, text, expected in blocks(path):
            if lang not in SHELL_LANGS:
                continue
            where = "%s:%d" % (rel, line)
            if marker not in ("illustrative", "run", "run:daemon"):
                unmarked.append("%s: shell block neither run nor marked <!-- illustrative -->" % where)
                continue
            if marker == "illustrative":
                continue
            d = scratch()
            try:
                if marker == "run:daemon":
                    problems = run_daemon_block(text, d, expected)
                elif any(ln.startswith("$ ") for ln in text.split("\n")):
                    problems = run_transcript(text, d)
                else:
                    problems = run_script(text, d, expected)
            except Exception as e:  # a timeout or a daemon that did not start
                problems = [repr(e)]
            finally:
                shutil.rmtree(d, ignore_errors=True)
            result("%s runs as documented" % where, problems)
        result("every shell block of %s is run or marked illustrative" % rel, unmarked)

    n = len(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().rstrip("\n").split("\n"))
    result("readme is at most 250 lines", [] if n <= 250 else ["README.md has %d lines" % n])

    internal = []
    for path in user_doc_files():
        text = open(path, encoding="utf-8").read()
        for m in INTERNAL_WORDS.finditer(text):  # the whole text: "issue\n13" counts too
            internal.append("%s:%d mentions %r" % (os.path.relpath(path, ROOT),
                                                   text.count("\n", 0, m.start()) + 1, m.group(0)))
    result("docs, readme and man pages name no internal document or issue number", internal)

    gen = os.path.join(ROOT, "scripts", "gen-error-table")
    p = subprocess.run([gen, "--check"], cwd=ROOT, capture_output=True, text=True)
    result("http api error table is the one generated from MV_CODE_TABLE",
           [] if p.returncode == 0 else [(p.stdout + p.stderr).strip()])

    print("docs_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
