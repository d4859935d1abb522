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
    def __init__(self, workdir, scrape_configs):
        self.port = free_port()
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
                       "scrape_configs": scrape_configs}, f)
        super().__init__(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={workdir}/tsdb",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"], workdir, "prometheus")
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http(self.url + "/-/ready")[0] == 200, what="Prometheus to be ready")

    def query(self, q):
        status, _, body = http(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]["result"]

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
