#!/usr/bin/env python3
"""package_test.py — what a user of a release gets: version, headers, shared library, install,
the systemd unit and its readiness protocol, the three Debian packages and their maintainer
scripts.

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


def openapi_client_and_package_files_carry_the_version_of_version_h():
    import json
    v = version()
    have = {
        "api/openapi.json info.version": json.load(open(os.path.join(ROOT, "api", "openapi.json")))["info"]["version"],
        "clients/typescript/package.json": json.load(open(os.path.join(ROOT, "clients", "typescript",
                                                                      "package.json")))["version"],
    }
    lock = json.load(open(os.path.join(ROOT, "clients", "typescript", "package-lock.json")))
    have["clients/typescript/package-lock.json"] = lock["version"]
    have['clients/typescript/package-lock.json packages[""]'] = lock["packages"][""]["version"]
    have["make version"] = run("make", "--no-print-directory", "-s", "version").strip()
    problems = ["%s is %s, version.h says %s" % (k, h, v) for k, h in have.items() if h != v]
    # and the script that copies it agrees that nothing is stale
    p = subprocess.run([os.path.join(ROOT, "scripts", "sync-version"), "--check"], capture_output=True, text=True)
    if p.returncode != 0:
        problems.append("scripts/sync-version --check: %s" % p.stdout.strip())
    return problems


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
    # libpq's own private libraries (-lpgcommon -lpgport -lgssapi_krb5) cannot be linked on
    # Debian: the store libraries are named in Libs.private, never through Requires.private
    p = subprocess.run(["pkg-config", "--static", "--libs", "missive"], env=env, capture_output=True, text=True)
    static = p.stdout.split()
    for lib in ("-lmissive", "-lsqlite3", "-lpq", "-lmicrohttpd", "-lcurl", "-lcrypto", "-ljansson"):
        if lib not in static:
            problems.append("pkg-config --static --libs missive lacks %s: %r" % (lib, p.stdout + p.stderr))
    for lib in ("-lpgcommon", "-lpgport", "-lgssapi_krb5"):
        if lib in static:
            problems.append("pkg-config --static --libs missive names %s, which no package ships" % lib)
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


# ---- the Debian packages ---------------------------------------------------------------------

PACKAGES = ("libmissive0", "libmissive-dev", "missive")
MULTIARCH = "/usr/lib/x86_64-linux-gnu"
_debs = {}


def debs():
    """Runs `make deb` once; {package name: path of its .deb}."""
    if not _debs:
        out = run("make", "--no-print-directory", "-s", "BUILD=" + BUILD_NAME, "deb").split()
        for path in out:
            name = os.path.basename(path).split("_")[0]
            _debs[name] = os.path.join(ROOT, path)
    return _debs


def deb_files(deb):
    """The paths of a package's files and links (not its directories)."""
    listing = run("dpkg-deb", "--contents", deb)
    # "lrwxrwxrwx root/root 0 2026-12-01 12:00 ./usr/lib/…/libmissive.so.0 -> libmissive.so.0.2.0"
    return set(re.sub(r"^\./", "/", ln.split(None, 5)[5].split(" -> ")[0])
               for ln in listing.splitlines() if not ln.startswith("d"))


def deb_field(deb, field):
    return run("dpkg-deb", "--field", deb, field).strip()


def release_build_only(name):
    if BUILD_NAME != "build":
        # the packages are built from the release build only; the sanitizer build checks the rest
        print("SKIP %s: BUILD=%s" % (name, BUILD_NAME))
        return True
    return False


def make_deb_builds_three_lintian_clean_packages_with_the_documented_contents():
    if release_build_only("make_deb_builds_three_lintian_clean_packages_with_the_documented_contents"):
        return "skip"
    v = version()
    built = debs()
    problems = []
    for name in PACKAGES:
        want = os.path.join(ROOT, BUILD_NAME, "%s_%s_amd64.deb" % (name, v))
        if built.get(name) != want:
            problems.append("make deb did not print %s (printed %s)" % (want, sorted(built.values())))
    if problems:
        return problems
    want = {
        "libmissive0": [MULTIARCH + "/libmissive.so.0", MULTIARCH + "/libmissive.so." + v,
                        "/usr/share/doc/libmissive0/copyright"],
        "libmissive-dev": ["/usr/include/missive.h", "/usr/include/missive/version.h", MULTIARCH + "/libmissive.a",
                           MULTIARCH + "/libmissive.so", MULTIARCH + "/pkgconfig/missive.pc",
                           "/usr/share/doc/libmissive-dev/copyright"],
        "missive": ["/usr/bin/missived", "/usr/bin/missive", "/usr/share/man/man1/missive.1.gz",
                    "/usr/share/man/man8/missived.8.gz", "/usr/share/man/man5/missive.json.5.gz",
                    "/lib/systemd/system/missived.service", "/etc/missive/missive.json",
                    "/usr/share/doc/missive/copyright",
                    "/usr/share/doc/missive/examples/templates/booking-request.json"],
    }
    owner = {}
    for name in PACKAGES:
        files = deb_files(built[name])
        problems += ["%s lacks %s" % (name, f) for f in want[name] if f not in files]
        for f in files:
            if f in owner:
                problems.append("%s is in %s and %s" % (f, owner[f], name))
            owner[f] = name
        if deb_field(built[name], "Version") != v:
            problems.append("%s has version %s" % (name, deb_field(built[name], "Version")))
    if any(f.startswith("/usr/lib/pkgconfig") or f.startswith("/usr/lib/libmissive") for f in owner):
        problems.append("a library file is outside the multiarch directory")
    dev_depends = deb_field(built["libmissive-dev"], "Depends")
    if "libmissive0 (= %s)" % v not in dev_depends:
        problems.append("libmissive-dev does not depend on libmissive0 (= %s): %s" % (v, dev_depends))
    for name in ("libmissive0", "libmissive-dev"):
        if deb_field(built[name], "Multi-Arch") != "same":
            problems.append("%s is not Multi-Arch: same" % name)
    if "libmissive 0 libmissive0 (>= %s)" % v not in run("dpkg-deb", "--info", built["libmissive0"], "shlibs"):
        problems.append("libmissive0's shlibs file does not name libmissive0")
    if "ldconfig" not in run("dpkg-deb", "--info", built["libmissive0"], "triggers"):
        problems.append("libmissive0 does not activate the ldconfig trigger")
    for script in ("postinst", "prerm", "postrm"):
        if run("dpkg-deb", "--info", built["missive"], script) != open(
                os.path.join(ROOT, "dist", "debian", "missive." + script)).read():
            problems.append("missive's %s is not dist/debian/missive.%s" % (script, script))
    if "/etc/missive/missive.json" not in run("dpkg-deb", "--info", built["missive"], "conffiles").split():
        problems.append("/etc/missive/missive.json is not a conffile")
    x = os.path.join(TMP, "deb")
    run("dpkg-deb", "-x", built["missive"], x)
    conf = open(os.path.join(x, "etc", "missive", "missive.json")).read()
    if "sqlite:/var/lib/missive/" not in conf or '"127.0.0.1:' not in conf:
        problems.append("the conffile is not SQLite in /var/lib/missive on loopback: %s" % conf)
    if shutil.which("lintian"):
        p = subprocess.run(["lintian", "--fail-on", "error,warning", *(built[n] for n in PACKAGES)],
                           capture_output=True, text=True)
        bad = [ln for ln in p.stdout.splitlines() if ln[:2] in ("E:", "W:")]
        if p.returncode != 0 or bad:
            problems.append("lintian: %s" % ("\n".join(bad) or p.stdout + p.stderr))
    else:
        problems.append("lintian is not installed (scripts/deps installs it)")
    return problems


def libmissive_dev_and_its_declared_depends_build_a_program_with_pkg_config_alone():
    # What a machine with only libmissive-dev and its Depends has: the two packages unpacked into
    # a root, and pkg-config seeing missive.pc and the .pc files of the declared Depends only.
    name = "libmissive_dev_and_its_declared_depends_build_a_program_with_pkg_config_alone"
    if release_build_only(name):
        return "skip"
    built = debs()
    root = os.path.join(TMP, "dev-root")
    pcdir = os.path.join(TMP, "dev-pc")
    os.makedirs(pcdir)
    for n in ("libmissive0", "libmissive-dev"):
        run("dpkg-deb", "-x", built[n], root)
    problems = []
    for dep in deb_field(built["libmissive-dev"], "Depends").split(","):
        first = dep.split("|")[0].split("(")[0].strip()
        if first == "libmissive0":
            continue
        p = subprocess.run(["dpkg-query", "-L", first], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("the declared dependency %s is not installed (scripts/deps installs it)" % first)
        for f in p.stdout.split():
            if f.endswith(".pc") and not os.path.exists(os.path.join(pcdir, os.path.basename(f))):
                os.symlink(f, os.path.join(pcdir, os.path.basename(f)))
    shutil.copy(os.path.join(root, MULTIARCH.lstrip("/"), "pkgconfig", "missive.pc"), pcdir)
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pcdir, PKG_CONFIG_SYSROOT_DIR=root)
    env.pop("PKG_CONFIG_PATH", None)

    def pc(*args):
        p = subprocess.run(["pkg-config", *args, "missive"], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("pkg-config %s missive: %s" % (" ".join(args), p.stderr.strip()))
        return p.stdout.split()

    doc = open(os.path.join(ROOT, "docs", "library.md")).read()
    src = os.path.join(TMP, "dev-example.c")
    open(src, "w").write(re.search(r"<!-- example: library -->\s*```c\n(.*?)```", doc, re.S).group(1))
    libdir = os.path.join(root, MULTIARCH.lstrip("/"))
    shared = os.path.join(TMP, "dev-shared")
    run("cc", "-std=c11", "-Wall", "-Werror", src, "-o", shared, *pc("--cflags", "--libs"), "-Wl,-rpath," + libdir)
    if os.path.join(libdir, "libmissive.so.0") not in run("ldd", shared):
        problems.append("the program built with pkg-config --libs does not load the packaged libmissive.so.0")
    # libmissive.a with what `pkg-config --static` adds (scripts/check-installed runs the same)
    static = os.path.join(TMP, "dev-static")
    run("cc", "-std=c11", "-Wall", "-Werror", src, "-o", static, "-Wl,--as-needed", *pc("--cflags"),
        "-Wl,-Bstatic", "-lmissive", "-Wl,-Bdynamic", *pc("--static", "--libs"))
    if "libmissive" in run("ldd", static):
        problems.append("the --static program loads libmissive.so")
    for exe in (shared, static):
        out = run(exe, "sqlite:" + exe + ".db", cwd=TMP)
        if not out.startswith("libmissive %s\n" % version()):
            problems.append("%s printed %r" % (os.path.basename(exe), out))
    return problems


def the_three_packages_install_in_order_and_scripts_check_installed_passes():
    # dpkg -i of libmissive0, libmissive-dev, missive (each needs the ones before and its declared
    # Depends), then what CI runs after installing them: scripts/check-installed. All of it in a
    # private mount namespace over overlays of /usr, /etc and /var, so this machine is unchanged.
    name = "the_three_packages_install_in_order_and_scripts_check_installed_passes"
    if release_build_only(name):
        return "skip"
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("SKIP %s: needs root and unshare(1) for a private overlay of /usr, /etc and /var" % name)
        return "skip"
    built = debs()
    host = lambda: subprocess.run(["dpkg-query", "-W", "-f=${Status}", "libmissive-dev"], capture_output=True,
                                  text=True).stdout
    before = host()
    ovl = os.path.join(TMP, "overlay")
    script = "set -e\n"
    for d in ("usr", "etc", "var"):
        script += ("mkdir -p {o}/upper/{d} {o}/work/{d}\n"
                   "mount -t overlay overlay -o lowerdir=/{d},upperdir={o}/upper/{d},workdir={o}/work/{d} /{d}\n"
                   ).format(o=ovl, d=d)
    script += "mount -t tmpfs tmpfs /run\n"  # no systemd running: the postinst makes /var/lib/missive
    for n in PACKAGES:
        script += "dpkg -i %s >%s/dpkg-%s.log 2>&1 || { cat %s/dpkg-%s.log; exit 1; }\n" % (built[n], TMP, n, TMP, n)
    script += "dpkg-query -W -f='${Package} ${Status}\\n' libmissive0 libmissive-dev missive\n"
    script += "scripts/check-installed\n"
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    problems = [] if p.returncode == 0 and "check-installed: ok" in p.stdout else [
        "rc %d: %s" % (p.returncode, out[-3000:])]
    for n in PACKAGES:
        if "%s install ok installed" % n not in p.stdout:
            problems.append("%s is not installed after dpkg -i" % n)
    if host() != before:
        problems.append("the install leaked out of the namespace: libmissive-dev is %r on this machine" % host())
    return problems


def maintainer_scripts(body, name):
    """Runs body (sh) in a private mount namespace whose /run and /var/lib are empty tmpfs, with
    systemctl and deb-systemd-* replaced by stubs that append their argv to $LOG; returns its
    stdout, or "skip" where no mount namespace can be made (not root)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("SKIP %s: needs root and unshare(1) to give the scripts a private /run and /var/lib" % name)
        return "skip"
    stubs = os.path.join(TMP, "stubs")
    os.makedirs(stubs, exist_ok=True)
    for tool in ("systemctl", "deb-systemd-invoke", "deb-systemd-helper"):
        path = os.path.join(stubs, tool)
        open(path, "w").write('#!/bin/sh\necho "%s $*" >> "$LOG"\n' % tool)
        os.chmod(path, 0o755)
    log = os.path.join(TMP, "stubs.log")
    open(log, "w").close()
    env = dict(os.environ, LOG=log, PATH=stubs + ":" + os.environ["PATH"],
               D=os.path.join(ROOT, "dist", "debian"))
    script = "set -e; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /var/lib\n" + body
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("the scripts failed (rc %d): %s" % (p.returncode, p.stderr))
    return p.stdout + "LOG\n" + open(log).read()


def the_postinst_makes_the_state_directory_without_systemd_and_starts_nothing():
    out = maintainer_scripts(r'''
        sh $D/missive.postinst configure ""
        stat -c 'made %a %U' /var/lib/missive
        echo data > /var/lib/missive/missive.db
        sh $D/missive.postinst configure 0.1.0        # an upgrade keeps it as it is
        cat /var/lib/missive/missive.db
        sh $D/missive.prerm remove
        sh $D/missive.postrm remove
        sh $D/missive.postrm purge                    # a store with data stays
        [ -e /var/lib/missive/missive.db ] && echo kept
        rm /var/lib/missive/missive.db
        sh $D/missive.postrm purge                    # an empty one goes
        [ -e /var/lib/missive ] || echo gone
    ''', "the_postinst_makes_the_state_directory_without_systemd_and_starts_nothing")
    if out == "skip":
        return out
    # purge ran twice: each time deb-systemd-helper forgets the unit's enablement state
    want = "made 750 root\ndata\nkept\ngone\nLOG\n" + "deb-systemd-helper purge missived.service\n" * 2
    return [] if out == want else ["without systemd the scripts printed and called %r, expected %r" % (out, want)]


def the_postinst_restarts_a_running_unit_on_upgrade_and_the_prerm_stops_it_on_removal():
    out = maintainer_scripts(r'''
        mkdir -p /run/systemd/system
        echo install; sh $D/missive.postinst configure ""
        [ -e /var/lib/missive ] || echo "no directory: StateDirectory= makes it"
        echo upgrade; sh $D/missive.prerm upgrade 0.2.0; sh $D/missive.postinst configure 0.1.0
        echo remove; sh $D/missive.prerm remove; sh $D/missive.postrm remove
    ''', "the_postinst_restarts_a_running_unit_on_upgrade_and_the_prerm_stops_it_on_removal")
    if out == "skip":
        return out
    want = ("install\nno directory: StateDirectory= makes it\nupgrade\nremove\nLOG\n"
            "systemctl --system daemon-reload\n"                      # install: starts nothing
            "systemctl --system daemon-reload\n"                      # upgrade
            "deb-systemd-invoke try-restart missived.service\n"
            "deb-systemd-invoke stop missived.service\n"              # remove
            "systemctl --system daemon-reload\n")
    return [] if out == want else ["under systemd the scripts printed and called %r, expected %r" % (out, want)]


def main():
    for fn in (both_programs_print_the_version_from_version_h,
               openapi_client_and_package_files_carry_the_version_of_version_h,
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
               make_deb_builds_three_lintian_clean_packages_with_the_documented_contents,
               libmissive_dev_and_its_declared_depends_build_a_program_with_pkg_config_alone,
               the_three_packages_install_in_order_and_scripts_check_installed_passes,
               the_postinst_makes_the_state_directory_without_systemd_and_starts_nothing,
               the_postinst_restarts_a_running_unit_on_upgrade_and_the_prerm_stops_it_on_removal):
        check(fn)
    shutil.rmtree(TMP, ignore_errors=True)
    print("package_test: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
