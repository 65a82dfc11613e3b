#!/usr/bin/env python3
"""package_test.py — what a user of a release gets: version, headers, shared library, install,
the systemd unit and its readiness protocol, the Debian package.

Each check is a sentence below; it fails on the first thing a user would trip over. The shared
library and headers are those of $BUILD (build/ by default); C and C++ compilers get the
sanitizer flags of the build ($SAN) so the same checks run under `make asan`. Prints
"N passed, M failed"; a check that cannot run here (systemd-analyze without a usable systemd)
prints SKIP and counts nothing."""
import glob
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
BUILD_NAME = os.environ.get("BUILD", "build")
BUILD = os.path.join(ROOT, BUILD_NAME)
SAN = os.environ.get("SAN", "").split()
LIB_PKGS = ["sqlite3", "libpq", "jansson", "libmicrohttpd", "libcurl", "libcrypto"]
passed = failed = 0
TMP = tempfile.mkdtemp(prefix="missive-package-")


def check(fn):
    global passed, failed
    name = fn.__name__
    try:
        problems = fn() or []
    except Exception as e:  # a failed command is a failed check, with its output
        problems = ["%s: %s" % (type(e).__name__, getattr(e, "output", None) or getattr(e, "stderr", None) or e)]
    if problems == "skip":
        return
    if problems:
        failed += 1
        for p in problems:
            sys.stderr.write("FAIL %s: %s\n" % (name, p))
    else:
        passed += 1
        print("ok %s" % name)


def run(*args, **kw):
    kw.setdefault("cwd", ROOT)
    return subprocess.run(list(args), capture_output=True, text=True, check=True, **kw).stdout


def pkg(*args):
    return run("pkg-config", *args, *LIB_PKGS).split()


def version():
    src = open(os.path.join(ROOT, "include", "missive", "version.h")).read()
    return re.search(r'#define MV_VERSION_STRING "([^"]+)"', src).group(1)


def public_headers():
    return sorted(glob.glob(os.path.join(ROOT, "include", "missive", "*.h")))


# ---- version -----------------------------------------------------------------------------

def both_programs_print_the_version_from_version_h():
    want = "missive %s\n" % version()
    return ["%s --version printed %r, not %r" % (p, out, want)
            for p in ("missived", "missive")
            for out in [run(os.path.join(BUILD, p), "--version")] if out != want]


def version_macros_agree_with_each_other_and_with_mv_version():
    src = os.path.join(TMP, "v.c")
    open(src, "w").write(
        '#include <missive.h>\n#include <stdio.h>\n#include <string.h>\n'
        'int main(void) {\n'
        '    char v[32];\n'
        '    snprintf(v, sizeof v, "%d.%d.%d", MV_VERSION_MAJOR, MV_VERSION_MINOR, MV_VERSION_PATCH);\n'
        '    printf("%s %s %s %d\\n", v, MV_VERSION_STRING, mv_version(), MV_VERSION_NUMBER);\n'
        '    return strcmp(v, MV_VERSION_STRING) != 0 || strcmp(mv_version(), MV_VERSION_STRING) != 0;\n'
        '}\n')
    exe = os.path.join(TMP, "v")
    run("cc", *SAN, "-std=c11", "-Wall", "-Werror", "-I" + os.path.join(ROOT, "include"), src,
        "-o", exe, "-L" + BUILD, "-Wl,-rpath," + BUILD, "-lmissive", *pkg("--cflags", "--libs"))
    out = run(exe).split()
    major, minor, patch = (int(x) for x in out[0].split("."))
    return [] if int(out[3]) == major * 1000000 + minor * 1000 + patch else ["MV_VERSION_NUMBER is %s" % out[3]]


# ---- headers -----------------------------------------------------------------------------

def missive_h_includes_every_public_header():
    text = open(os.path.join(ROOT, "include", "missive.h")).read()
    return ["missive.h does not include missive/%s" % os.path.basename(h)
            for h in public_headers() if '#include "missive/%s"' % os.path.basename(h) not in text]


def every_public_header_compiles_alone_as_c_and_cxx_without_internal_headers():
    problems = []
    jansson = run("pkg-config", "--cflags", "jansson").split()
    for h in public_headers():
        # declarations must keep C linkage when a C++ program includes them
        if not re.search(r'#ifdef __cplusplus\s*\nextern "C" \{', open(h).read()):
            problems.append("%s lacks the extern \"C\" block" % os.path.relpath(h, ROOT))
    for h in public_headers() + [os.path.join(ROOT, "include", "missive.h")]:
        rel = os.path.relpath(h, os.path.join(ROOT, "include"))
        for compiler, std, ext in (("cc", "-std=c11", "c"), ("g++", "-std=c++11", "cc")):
            src = os.path.join(TMP, "one." + ext)
            open(src, "w").write('#include "%s"\n#include "%s"\nint main(void) { return 0; }\n' % (rel, rel))
            # -Iinclude only: a public header that needed src/ would not compile
            p = subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-pedantic",
                                "-I" + os.path.join(ROOT, "include"), *jansson, "-fsyntax-only", src],
                               capture_output=True, text=True)
            if p.returncode != 0:
                problems.append("%s with %s: %s" % (rel, compiler, p.stderr.strip()[:600]))
    return problems


def a_cxx_program_including_missive_h_links_and_runs():
    src = os.path.join(TMP, "hello.cc")
    open(src, "w").write(
        '#include <missive.h>\n#include <cstdio>\n#include <cstring>\n'
        'int main() {\n'
        '    mv_err err = mv_err();\n'
        '    mv_store *store = nullptr;\n'
        '    if (mv_store_open("sqlite::memory:", nullptr, &store, &err) == MV_OK) return 2;\n'
        '    std::printf("%s %s %d\\n", mv_version(), mv_code_name(err.code), mv_code_http_status(MV_MESSAGE_ARCHIVED));\n'
        '    return std::strcmp(mv_code_name(MV_ACTION_CONFLICT), "action_conflict") != 0;\n'
        '}\n')
    exe = os.path.join(TMP, "hello")
    run("g++", *SAN, "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"),
        src, "-o", exe, "-L" + BUILD, "-Wl,-rpath," + BUILD, "-lmissive", *pkg("--cflags", "--libs"))
    out = run(exe).split()
    want = [version(), "invalid_argument", "410"]
    return [] if out == want else ["printed %r, expected %r" % (out, want)]


# ---- the shared library -------------------------------------------------------------------

def shared_library_has_soname_libmissive_so_0():
    lib = os.path.join(BUILD, "libmissive.so.0")
    out = run("readelf", "-d", lib)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    problems = [] if m and m.group(1) == "libmissive.so.0" else ["SONAME is %s" % (m.group(1) if m else "missing")]
    if os.path.realpath(lib) != os.path.join(BUILD, "libmissive.so." + version()):
        problems.append("libmissive.so.0 points at %s" % os.path.realpath(lib))
    return problems


def shared_library_exports_only_mv_symbols():
    out = run("nm", "-D", "--defined-only", os.path.join(BUILD, "libmissive.so.0"))
    names = [ln.split()[-1] for ln in out.splitlines() if ln.strip()]
    bad = [n for n in names if not n.startswith("mv_") or n.startswith("mv__")]  # mv__: internal
    problems = ["exports %s" % n for n in bad[:20]]
    for want in ("mv_version", "mv_message_create", "mv_action_handle", "mv_store_open"):
        if want not in names:
            problems.append("does not export %s" % want)
    return problems


def shared_library_needs_no_symbol_it_does_not_link():
    # a program linking only -lmissive (and libc) must load: every dependency is a NEEDED entry
    src = os.path.join(TMP, "needs.c")
    open(src, "w").write('#include <missive.h>\nint main(void) { return mv_version()[0] == 0; }\n')
    exe = os.path.join(TMP, "needs")
    run("cc", *SAN, "-std=c11", "-I" + os.path.join(ROOT, "include"), *run("pkg-config", "--cflags", "jansson").split(),
        src, "-o", exe, "-L" + BUILD, "-Wl,-rpath," + BUILD, "-Wl,--no-undefined", "-lmissive")
    run(exe)
    return []


# ---- the library example of docs/library.md -------------------------------------------------

def library_example_in_the_docs_compiles_and_runs_twice_as_documented():
    doc = open(os.path.join(ROOT, "docs", "library.md")).read()
    m = re.search(r"<!-- example: library -->\s*```c\n(.*?)```", doc, re.S)
    o = re.search(r"<!-- output -->\s*```text\n(.*?)```", doc[m.end():], re.S) if m else None
    if not m or not o:
        return ["docs/library.md lacks the <!-- example: library --> program or its output"]
    src = os.path.join(TMP, "example.c")
    open(src, "w").write(m.group(1))
    exe = os.path.join(TMP, "example")
    run("cc", *SAN, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"), src,
        "-o", exe, "-L" + BUILD, "-Wl,-rpath," + BUILD, "-lmissive", *pkg("--cflags", "--libs"))
    problems = []
    store = "sqlite:" + os.path.join(TMP, "example.db")
    for n in (1, 2):
        out = run(exe, store, cwd=TMP)
        if out != o.group(1):
            problems.append("run %d printed %r, the docs say %r" % (n, out, o.group(1)))
    return problems


# ---- make install / uninstall ---------------------------------------------------------------

def make_install_puts_the_documented_layout_under_destdir_and_uninstall_removes_it():
    dest = os.path.join(TMP, "stage")
    # the build's own flags (make test passes them), so the stamp of its objects stays valid
    make = ["make", "--no-print-directory", "-s", "BUILD=" + BUILD_NAME]
    make += ["%s=%s" % (k, os.environ[k]) for k in ("OPT", "SAN") if k in os.environ]
    run(*make, "install", "PREFIX=/opt/mv", "DESTDIR=" + dest)
    v = version()
    want = ["bin/missived", "bin/missive", "lib/libmissive.a", "lib/libmissive.so.%s" % v,
            "lib/libmissive.so.0", "lib/libmissive.so", "include/missive.h", "lib/pkgconfig/missive.pc",
            "share/man/man1/missive.1", "share/man/man8/missived.8", "share/man/man5/missive.json.5",
            "lib/systemd/system/missived.service"]
    want += ["include/missive/" + os.path.basename(h) for h in public_headers()]
    base = os.path.join(dest, "opt", "mv")
    problems = ["missing %s" % w for w in want if not os.path.lexists(os.path.join(base, w))]
    unit = open(os.path.join(base, "lib/systemd/system/missived.service")).read()
    if "ExecStart=/opt/mv/bin/missived " not in unit:
        problems.append("the unit's ExecStart does not point into PREFIX/bin")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(base, "lib", "pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=dest)
    p = subprocess.run(["pkg-config", "--modversion", "missive"], env=env, capture_output=True, text=True)
    if p.stdout.strip() != v:
        problems.append("pkg-config --modversion missive: %r" % (p.stdout + p.stderr))
    p = subprocess.run(["pkg-config", "--print-requires-private", "missive"], env=env, capture_output=True, text=True)
    if "sqlite3" not in p.stdout or "libpq" not in p.stdout:
        problems.append("Requires.private lacks the store libraries: %r" % p.stdout)
    # a program built from the staged tree with pkg-config alone
    src = os.path.join(TMP, "staged.c")
    open(src, "w").write('#include <missive.h>\n#include <stdio.h>\nint main(void) { puts(mv_version()); return 0; }\n')
    exe = os.path.join(TMP, "staged")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "missive"], env=env, capture_output=True,
                           text=True).stdout.split()
    run("cc", *SAN, src, "-o", exe, *flags, "-Wl,-rpath," + os.path.join(base, "lib"))
    if run(exe).strip() != v:
        problems.append("the staged program printed another version")
    run(*make, "uninstall", "PREFIX=/opt/mv", "DESTDIR=" + dest)
    left = [os.path.relpath(os.path.join(d, f), dest) for d, _, fs in os.walk(dest) for f in fs]
    problems += ["left after uninstall: %s" % f for f in left]
    return problems


# ---- systemd --------------------------------------------------------------------------------

def systemd_unit_passes_systemd_analyze_verify_and_is_hardened():
    tool = shutil.which("systemd-analyze")
    unitdir = os.path.join(TMP, "unit")
    os.makedirs(unitdir, exist_ok=True)
    unit = os.path.join(unitdir, "missived.service")
    text = open(os.path.join(ROOT, "dist", "missived.service.in")).read().replace("@BINDIR@", BUILD)
    open(unit, "w").write(text)
    problems = []
    for key in ("Type=notify", "StateDirectory=missive", "DynamicUser=yes", "ProtectSystem=strict",
                "NoNewPrivileges=yes"):
        if "\n" + key + "\n" not in text:
            problems.append("the unit lacks %s" % key)
    if not tool or subprocess.run([tool, "--version"], capture_output=True).returncode != 0:
        print("SKIP systemd_unit_passes_systemd_analyze_verify_and_is_hardened: systemd-analyze cannot run here")
        return "skip"
    p = subprocess.run([tool, "verify", "--man=no", unit], capture_output=True, text=True)
    if p.returncode != 0 or (p.stdout + p.stderr).strip():
        problems.append("systemd-analyze verify: rc %d: %s" % (p.returncode, (p.stdout + p.stderr).strip()))
    p = subprocess.run([tool, "security", "--offline=yes", "--threshold=20", "--no-pager", unit],
                       capture_output=True, text=True)
    if p.returncode != 0:
        problems.append("exposure above 2.0: %s" % p.stdout.strip().splitlines()[-1:])
    return problems


def missived_reports_ready_when_listening_and_stopping_when_draining():
    sock_path = os.path.join(TMP, "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(sock_path)
    s.settimeout(10)
    conf = os.path.join(TMP, "notify.json")
    open(conf, "w").write('{"listen": "127.0.0.1:0", "store": "sqlite:%s/notify.db"}' % TMP)
    env = dict(os.environ, NOTIFY_SOCKET=sock_path)
    proc = subprocess.Popen([os.path.join(BUILD, "missived"), "--config", conf], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    problems = []
    try:
        ready = s.recv(4096).decode()
        if "READY=1" not in ready.split("\n"):
            problems.append("first notification %r" % ready)
        # it really listens by then: the log names the port and /livez or /healthz answers
        line = proc.stderr.readline()
        port = int(re.search(r'"port":\s*(\d+)', line).group(1))
        urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5).read()
        proc.send_signal(signal.SIGTERM)
        stopping = s.recv(4096).decode()
        if "STOPPING=1" not in stopping.split("\n"):
            problems.append("notification after SIGTERM %r" % stopping)
        if proc.wait(timeout=20) != 0:
            problems.append("exit status %d after SIGTERM" % proc.returncode)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        s.close()
    return problems


# ---- the Debian package ----------------------------------------------------------------------

def make_deb_builds_a_lintian_clean_package_with_the_documented_contents():
    if BUILD_NAME != "build":
        # the package is built from the release build only; the sanitizer build checks the rest
        print("SKIP make_deb_builds_a_lintian_clean_package_with_the_documented_contents: BUILD=%s" % BUILD_NAME)
        return "skip"
    out = run("make", "--no-print-directory", "-s", "BUILD=" + BUILD_NAME, "deb").strip().splitlines()[-1]
    deb = os.path.join(ROOT, out)
    v = version()
    problems = [] if out == "%s/missive_%s_amd64.deb" % (BUILD_NAME, v) else ["make deb printed %r" % out]
    listing = run("dpkg-deb", "--contents", deb)
    # "drwxr-xr-x root/root 0 2026-12-01 12:00 ./usr/lib/libmissive.so.0 -> libmissive.so.0.2.0"
    files = set(re.sub(r"^\./", "/", ln.split(None, 5)[5].split(" -> ")[0]) for ln in listing.splitlines())
    for f in ("/usr/bin/missived", "/usr/bin/missive", "/usr/lib/libmissive.so.0", "/usr/lib/libmissive.a",
              "/usr/include/missive.h", "/usr/include/missive/version.h", "/usr/lib/pkgconfig/missive.pc",
              "/usr/share/man/man1/missive.1.gz", "/usr/share/man/man8/missived.8.gz",
              "/usr/share/man/man5/missive.json.5.gz", "/lib/systemd/system/missived.service",
              "/etc/missive/missive.json", "/usr/share/doc/missive/copyright",
              "/usr/share/doc/missive/examples/templates/booking-request.json"):
        if f not in files and f + "/" not in files:
            problems.append("the package lacks %s" % f)
    conffiles = run("dpkg-deb", "--info", deb, "conffiles")
    if "/etc/missive/missive.json" not in conffiles.split():
        problems.append("/etc/missive/missive.json is not a conffile")
    x = os.path.join(TMP, "deb")
    run("dpkg-deb", "-x", deb, x)
    conf = open(os.path.join(x, "etc", "missive", "missive.json")).read()
    if "sqlite:/var/lib/missive/" not in conf or '"127.0.0.1:' not in conf:
        problems.append("the conffile is not SQLite in /var/lib/missive on loopback: %s" % conf)
    if shutil.which("lintian"):
        p = subprocess.run(["lintian", "--fail-on", "error", deb], capture_output=True, text=True)
        errors = [ln for ln in p.stdout.splitlines() if ln.startswith("E:")]
        if p.returncode != 0 or errors:
            problems.append("lintian: %s" % ("\n".join(errors) or p.stdout + p.stderr))
    else:
        problems.append("lintian is not installed (scripts/deps installs it)")
    return problems


def main():
    for fn in (both_programs_print_the_version_from_version_h,
               version_macros_agree_with_each_other_and_with_mv_version,
               missive_h_includes_every_public_header,
               every_public_header_compiles_alone_as_c_and_cxx_without_internal_headers,
               a_cxx_program_including_missive_h_links_and_runs,
               shared_library_has_soname_libmissive_so_0,
               shared_library_exports_only_mv_symbols,
               shared_library_needs_no_symbol_it_does_not_link,
               library_example_in_the_docs_compiles_and_runs_twice_as_documented,
               make_install_puts_the_documented_layout_under_destdir_and_uninstall_removes_it,
               systemd_unit_passes_systemd_analyze_verify_and_is_hardened,
               missived_reports_ready_when_listening_and_stopping_when_draining,
               make_deb_builds_a_lintian_clean_package_with_the_documented_contents):
        check(fn)
    shutil.rmtree(TMP, ignore_errors=True)
    print("package_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
