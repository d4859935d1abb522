"""Real servers for the end-to-end tests: processes started on 127.0.0.1 on
free ports, waited for over HTTP, and stopped by PID when the test ends.
Every wait is bounded."""
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, headers=None, method="GET", data=None, context=None, timeout=10):
    """Returns (status, headers, body bytes); HTTP errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def wait_until(check, timeout=30, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Process:
    """A child process whose output goes to files in the test's directory."""

    def __init__(self, args, workdir, name):
        self.name = name
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        self.out = open(self.out_path, "w")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen([str(a) for a in args], stdout=self.out, stderr=self.err,
                                     stdin=subprocess.DEVNULL, cwd=workdir)

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        return open(self.err_path).read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.out.close()
        self.err.close()


class Prometheus(Process):
    """A real Prometheus on 127.0.0.1 scraping every second. rule_files,
    alertmanager (a URL), external_labels: as in prometheus.yml (rules then
    evaluated every second)."""

    def __init__(self, workdir, scrape_configs, rule_files=None, alertmanager=None, external_labels=None,
                 extra_args=(), port=None):
        self.port = port or free_port()
        config = os.path.join(workdir, "prometheus.yml")
        settings = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
                    "scrape_configs": scrape_configs}
        if rule_files:
            settings["rule_files"] = [str(f) for f in rule_files]
        if alertmanager:
            settings["alerting"] = {"alertmanagers": [{"static_configs": [
                {"targets": [urllib.parse.urlparse(alertmanager).netloc]}]}]}
        if external_labels:
            settings["global"]["external_labels"] = external_labels
        with open(config, "w") as f:
            json.dump(settings, f)
        super().__init__(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={workdir}/tsdb",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn", *extra_args], workdir,
                         "prometheus")
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http(self.url + "/-/ready")[0] == 200, what="Prometheus to be ready")

    def query(self, q):
        status, _, body = http(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]["result"]

    def series(self, match):
        """The label sets of the series matching a selector (the /api/v1/series endpoint)."""
        status, _, body = http(self.url + "/api/v1/series?" + urllib.parse.urlencode({"match[]": match}))
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]

    def alerts(self):
        """Its alerts, as GET /api/v1/alerts lists them."""
        status, _, body = http(self.url + "/api/v1/alerts")
        assert status == 200, body
        return json.loads(body)["data"]["alerts"]

    def wait_for(self, q, count=1, timeout=30):
        return wait_until(lambda: (lambda r: r if len(r) >= count else None)(self.query(q)), timeout=timeout,
                          what=f"{count} series for {q}")


class Pushgateway(Process):
    def __init__(self, workdir):
        self.port = free_port()
        super().__init__(["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{self.port}",
                          "--log.level=warn"], workdir, "pushgateway")
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http(self.url + "/-/ready")[0] == 200, what="the Pushgateway to be ready")

    def metrics(self):
        return http(self.url + "/metrics")[2].decode()


def tls_context(ca_file):
    ctx = ssl.create_default_context(cafile=ca_file)
    return ctx


class Alertmanager(Process):
    """A real Alertmanager on 127.0.0.1, without clustering. webhook: a URL it
    notifies (firing and resolved), or None for a receiver that drops all."""

    def __init__(self, workdir, webhook=None):
        self.port = free_port()
        config = os.path.join(workdir, "alertmanager.yml")
        receiver = {"name": "test"}
        if webhook:
            receiver["webhook_configs"] = [{"url": webhook, "send_resolved": True}]
        with open(config, "w") as f:
            json.dump({"route": {"receiver": "test", "group_wait": "1s", "group_interval": "1s",
                                 "repeat_interval": "1h", "group_by": ["alertname"]},
                       "receivers": [receiver]}, f)
        super().__init__(["prometheus-alertmanager", f"--config.file={config}", f"--storage.path={workdir}/am-data",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
                          "--log.level=warn"], workdir, "alertmanager")
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http(self.url + "/-/ready")[0] == 200, what="Alertmanager to be ready")

    def alerts(self):
        """The active alerts, as GET /api/v2/alerts lists them."""
        status, _, body = http(self.url + "/api/v2/alerts")
        assert status == 200, body
        return json.loads(body)


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 (in a thread) that records every request.
    fail_first: answer fail_status (500) to that many requests first."""

    def __init__(self, port=None, fail_first=0, fail_status=500):
        import http.server
        import threading
        self.requests = []
        self.fail_first = fail_first
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    failing = receiver.fail_first > 0
                    if failing:
                        receiver.fail_first -= 1
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                              "body": body, "answered": fail_status if failing else 200})
                self.send_response(fail_status if failing else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"errcode":1,"errmsg":"test failure"}' if failing else b'{"errcode":0}')

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def received(self, path_prefix="/", answered=200):
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(path_prefix) and r["answered"] == answered]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
