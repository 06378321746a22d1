#!/usr/bin/env python3
"""Real-browser check of the dashboard (issue 7), standard library only.

Drives headless Chromium through chromedriver's W3C WebDriver HTTP API:
seeds a broker with data, loads every view, clicks a maintenance switch and a
DLQ retry (when those endpoints exist on this broker) and checks their effect
through the API, and saves screenshots.

With QUEEN_DASH_JWT_SECRET set, the broker runs with JWT on (HS256, that
secret): the script's own API calls carry an admin token it mints, and the
browser run checks that the dashboard asks for a token, that the token is
entered once, and that it is kept for the session (every view, and a reload,
work without entering it again).

usage: dashboard_check.py BROKER_URL CHROMEDRIVER_URL SHOTS_DIR
Exit 0 when every check passed (a check whose endpoint the broker lacks is
reported as SKIP), 1 otherwise.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

BROKER, DRIVER, SHOTS = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/"), sys.argv[3]
JWT_SECRET = os.environ.get("QUEEN_DASH_JWT_SECRET", "")


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def mint(role, ttl_s=3600):
    """An HS256 token for JWT_SECRET with `role` (security.md SEC-12 claim names)."""
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    now = int(time.time())
    body = b64url(json.dumps({"sub": "dashboard-check", "role": role, "iat": now,
                              "exp": now + ttl_s}).encode())
    sig = hmac.new(JWT_SECRET.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


TOKEN = mint("admin") if JWT_SECRET else ""
ELEMENT = "element-6066-11e4-a021-c180f4ce2b8b"
WAIT_S = 20  # per element wait: generous for a loaded CI machine
results = []


def http(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data else {}
    if TOKEN and url.startswith(BROKER):
        headers["Authorization"] = "Bearer " + TOKEN
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw and raw[:1] in b"[{" else raw)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw


def broker(method, path, body=None):
    return http(method, BROKER + path, body)


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="queen-chromium-")
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage", "--window-size=1360,900", f"--user-data-dir={self.profile}"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium"), "args": args}}}}
        status, r = http("POST", DRIVER + "/session", caps, timeout=120)
        if status != 200:
            raise SystemExit(f"chromedriver refused a session: {status} {r}")
        self.sid = r["value"]["sessionId"]

    def cmd(self, method, path, body=None):
        status, r = http(method, f"{DRIVER}/session/{self.sid}{path}", body)
        if status != 200:
            raise RuntimeError(f"{method} {path}: {status} {r}")
        return r["value"]

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css, wait=WAIT_S):
        end = time.time() + wait
        while True:
            status, r = http("POST", f"{DRIVER}/session/{self.sid}/elements",
                             {"using": "css selector", "value": css})
            if status == 200 and r["value"]:
                ref = r["value"][0]
                return ref.get(ELEMENT) or next(iter(ref.values()))
            if time.time() > end:
                return None
            time.sleep(0.2)

    def click(self, eid):
        self.cmd("POST", f"/element/{eid}/click", {})

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", css)

    def until(self, script, wait=WAIT_S, *args):
        end = time.time() + wait
        while time.time() < end:
            if self.js(script, *args):
                return True
            time.sleep(0.25)
        return False

    def shot(self, name):
        png = base64.b64decode(self.cmd("GET", "/screenshot"))
        path = os.path.join(SHOTS, name + ".png")
        with open(path, "wb") as f:
            f.write(png)
        return path

    def close(self):
        try:
            self.cmd("DELETE", "")
        except Exception:  # the session may already be gone
            pass


def record(name, ok, note=""):
    results.append((name, ok, note))
    print(f"{'PASS' if ok is True else 'SKIP' if ok is None else 'FAIL'}  {name}  {note}", flush=True)


def seed():
    items = [{"queue": "orders", "partition": f"p{i % 3}", "transactionId": f"o{i}",
              "payload": {"order": i, "amount": i * 3}} for i in range(60)]
    assert broker("POST", "/api/v1/push", {"items": items})[0] == 201
    broker("POST", "/api/v1/configure", {"queue": "payments", "namespace": "billing", "options": {"retryLimit": 1}})
    items = [{"queue": "payments", "partition": "Default", "transactionId": f"pay{i}", "payload": {"n": i}}
             for i in range(5)]
    assert broker("POST", "/api/v1/push", {"items": items})[0] == 201
    status, pop = broker("GET", "/api/v1/pop/queue/payments?batch=2")
    assert status == 200, (status, pop)
    for m in pop["messages"]:
        broker("POST", "/api/v1/ack", {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                       "leaseId": pop["leaseId"], "status": "dlq", "error": "card declined"})
    for _ in range(3):
        status, pop = broker("GET", "/api/v1/pop/queue/orders?batch=5&consumerGroup=analytics")
        if status == 200:
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
                     "leaseId": pop["leaseId"]} for m in pop["messages"]]
            broker("POST", "/api/v1/ack/batch", {"acknowledgments": acks, "consumerGroup": "analytics"})


def traffic(stop):
    """Pushes, pops and acks for the overview chart until `stop` is set."""
    n = 0
    while not stop.is_set():
        items = [{"queue": "live", "transactionId": f"l{n}-{i}", "payload": {"i": i}} for i in range(20)]
        broker("POST", "/api/v1/push", {"items": items})
        status, pop = broker("GET", "/api/v1/pop/queue/live?batch=15")
        if status == 200:
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
                     "leaseId": pop["leaseId"]} for m in pop["messages"]]
            broker("POST", "/api/v1/ack/batch", {"acknowledgments": acks})
        n += 1
        time.sleep(0.1)


def view(b, name, hash_, ready_css):
    b.go(f"{BROKER}/#/{hash_}")
    ok = b.until("return !document.querySelector('#view').innerText.includes('Loading')"
                 " && document.querySelector(arguments[0]) !== null", WAIT_S, ready_css)
    txt = b.text("#view") or ""
    b.shot(name)
    record(f"view {name}", ok, txt.splitlines()[0] if txt else "")
    return txt


def sign_in(b):
    """JWT on: the dashboard asks for a token; it is entered once, here."""
    b.go(BROKER + "/#/queues")
    asked = b.until("return !document.querySelector('#auth').hidden")
    refused = b.until("return document.querySelector('#view').innerText.includes('token')")
    b.shot("jwt-asks-for-token")
    record("JWT on: the dashboard asks for a token", asked and refused)
    b.js("document.querySelector('#token').value = arguments[0];"
         "document.querySelector('#auth').requestSubmit();", TOKEN)
    ok = b.until("return document.querySelector('#auth').hidden"
                 " && document.querySelector('#view table, #view .na') !== null")
    kept = b.js("return sessionStorage.getItem('queen.token') === arguments[0]", TOKEN)
    record("JWT on: token entered once, views load", ok and kept)


def kept_for_the_session(b):
    """After every view: a reload still needs no token (sessionStorage keeps it)."""
    b.js("location.reload()")
    time.sleep(1)
    ok = b.until("return document.readyState === 'complete' && document.querySelector('#auth').hidden"
                 " && document.querySelector('#view table, #view .na, #view h2, #rates') !== null")
    txt = b.text("#view") or ""
    b.shot("jwt-after-reload")
    record("JWT on: token kept for the session (reload)", ok and "needs a token" not in txt)


def main():
    os.makedirs(SHOTS, exist_ok=True)
    seed()
    stop = threading.Event()
    t = threading.Thread(target=traffic, args=(stop,), daemon=True)
    t.start()
    b = Browser()
    try:
        if TOKEN:
            sign_in(b)
        b.go(BROKER + "/")
        ok = b.find("#rates") is not None and b.until(
            "return document.querySelector('#status').innerText.startsWith('live')")
        # Let the 2 s sampler collect a few points with traffic flowing.
        time.sleep(9)
        drawn = b.js("const c = document.querySelector('#rates'); if (!c) return 0;"
                     "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                     "let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i+3] && d[i+2] > 180 && d[i] < 100) n++;"
                     "return n;")
        b.shot("overview")
        record("view overview (live chart)", ok and drawn > 50, f"push-line pixels {drawn}")
        stop.set()
        t.join()

        txt = view(b, "queues", "queues", "table, .na")
        if "not available" not in txt:
            record("queue list shows seeded queues", "orders" in txt and "payments" in txt)
            view(b, "queue-detail", "queues/orders", "h2")
        view(b, "groups", "groups", "table, .na")
        view(b, "messages", "messages", "table, .na")
        view(b, "streams", "streams", "table, .na")
        view(b, "mesh", "mesh", "pre, .na")

        # DLQ retry.
        dtxt = view(b, "dlq", "dlq", "table, .na")
        retry = b.find("button.retry", wait=2)
        if retry is None:
            record("DLQ retry", None, "no DLQ rows or retry endpoint on this broker")
        else:
            before = broker("GET", "/api/v1/dlq?queue=payments")[1].get("total")
            b.click(retry)
            ok = b.until("return [...document.querySelectorAll('#view td')].some(td => td.innerText === 'retried')")
            after = broker("GET", "/api/v1/dlq?queue=payments")[1].get("total")
            b.shot("dlq-after-retry")
            if not ok and "not available" in (b.text("#view") or ""):
                record("DLQ retry", None, "retry endpoint not available on this broker")
            else:
                record("DLQ retry", ok and after == before - 1, f"dlq total {before} -> {after}")
        del dtxt

        # Maintenance switch.
        view(b, "system", "system", "input, .na")
        sw = b.find("#maint-push", wait=2)
        if sw is None:
            record("maintenance switch", None, "maintenance endpoints not available on this broker")
        else:
            b.click(sw)
            ok = b.until("return document.querySelector('#maint-push-state').innerText === 'on'")
            state = broker("GET", "/api/v1/system/maintenance")[1]
            b.shot("system-maintenance-on")
            record("maintenance switch on", ok and state.get("maintenanceMode") is True, json.dumps(state)[:120])
            b.click(b.find("#maint-push"))
            ok = b.until("return document.querySelector('#maint-push-state').innerText === 'off'")
            state = broker("GET", "/api/v1/system/maintenance")[1]
            record("maintenance switch off", ok and state.get("maintenanceMode") is False)
        if TOKEN:
            kept_for_the_session(b)
    finally:
        stop.set()
        b.close()
    failed = [r for r in results if r[1] is False]
    print(f"dashboard check: {sum(r[1] is True for r in results)} passed, {len(failed)} failed, "
          f"{sum(r[1] is None for r in results)} skipped; screenshots in {SHOTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
