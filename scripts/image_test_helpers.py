"""The parts of scripts/image_test.sh that are easier in Python (standard library only: it runs
with the host's python3, outside the panel's virtualenv).

    apt-uri SUITE           the URI of SUITE (bookworm, bookworm-security) in this host's apt sources
    free-ports              a free port on 127.0.0.1 for the web and a free range of 20 for clusters
    env-file                the env file's secrets, fresh (docker/compose.yaml reads them)
    login-status URL        the HTTP status of URL, 0 when nothing answers
    web-add-user BASE NAME  log in at BASE as admin (ADMIN_PASSWORD) and add the database user NAME
                            on the first cluster's Users tab
    run-tps JSON            the TPS of a `bench run --format json` that succeeded; exit 1 otherwise
"""

from __future__ import annotations

import base64
import glob
import http.cookiejar
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

CLUSTER_PORTS = 20


def _deb822_uri(text: str, suite: str) -> str | None:
    for stanza in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith(("#", " ")):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
        if (
            "deb" in fields.get("types", [])
            and suite in fields.get("suites", [])
            and fields.get("enabled", ["yes"]) != ["no"]
            and fields.get("uris")
        ):
            return fields["uris"][0]
    return None


def _one_line_uri(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] != ["deb"]:
            continue
        words = words[1:]
        if words and words[0].startswith("["):  # [signed-by=… arch=…]
            while words and not words[0].endswith("]"):
                words.pop(0)
            words = words[1:]
        if len(words) > 1 and words[1] == suite:
            return words[0]
    return None


def apt_uri(suite: str) -> int:
    one_line = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]
    paths = one_line + sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    for path in paths:
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        uri = _deb822_uri(text, suite) if path.endswith(".sources") else _one_line_uri(text, suite)
        if uri:
            print(uri)
            return 0
    return 1


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports() -> int:
    web = next(p for p in range(18000, 18100) if _free(p))
    start = next(
        s for s in range(35060, 36000, CLUSTER_PORTS) if all(_free(p) for p in range(s, s + CLUSTER_PORTS))
    )
    print(web, f"{start}-{start + CLUSTER_PORTS - 1}")
    return 0


def env_file() -> int:
    values = {
        "METADB_PASSWORD": secrets.token_hex(24),
        "REDIS_PASSWORD": secrets.token_hex(24),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "PANEL_ENCRYPTION_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),  # a Fernet key
        "PANEL_METRICS_TOKEN": secrets.token_urlsafe(32),
    }
    print("\n".join(f"{key}={value}" for key, value in values.items()))
    # The task-signing pair, from the checkout's own code (it needs the cryptography package).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    venv_python = os.path.join(root, ".venv", "bin", "python")
    python = venv_python if os.path.exists(venv_python) else sys.executable
    pair = subprocess.run(
        [python, "-m", "panel.signing"], cwd=root, capture_output=True, text=True, check=True, timeout=120
    )
    print(pair.stdout.strip())
    return 0


def login_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            print(answer.status)
    except urllib.error.HTTPError as exc:
        print(exc.code)
    except OSError:
        print(0)
    return 0


def web_add_user(base: str, name: str) -> int:
    jar = http.cookiejar.CookieJar()
    web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def post(path: str, fields: dict[str, str]) -> str:
        token = next(c.value for c in jar if c.name == "csrftoken")
        data = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token}).encode()
        request = urllib.request.Request(base + path, data, headers={"Referer": base + path})
        with web.open(request, timeout=90) as answer:
            return answer.read().decode()

    with web.open(base + "/login/", timeout=10) as answer:
        answer.read()
    listing = post("/login/", {"username": "admin", "password": os.environ["ADMIN_PASSWORD"], "next": "/"})
    ids = re.findall(r'href="/clusters/([0-9a-f-]{36})/"', listing)
    if not ids:
        print("no cluster on the page shown after logging in", file=sys.stderr)
        return 1
    page = post(f"/clusters/{ids[0]}/users/add/", {"user-name": name})
    if f"“{name}” added" not in page:
        print(f"the Users tab did not say {name} was added:\n{page[-1500:]}", file=sys.stderr)
        return 1
    print(f"    {name} added through the web page")
    return 0


def run_tps(text: str) -> int:
    run = json.loads(text)
    tps = run.get("tps") or 0
    if run.get("status") != "succeeded" or not tps > 0:
        print(f"the run did not succeed with TPS > 0: {run}", file=sys.stderr)
        return 1
    print(f"{tps:.0f}")
    return 0


def main(argv: list[str]) -> int:
    commands = {
        "apt-uri": apt_uri,
        "free-ports": free_ports,
        "env-file": env_file,
        "login-status": login_status,
        "web-add-user": web_add_user,
        "run-tps": run_tps,
    }
    if not argv or argv[0] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[argv[0]](*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
