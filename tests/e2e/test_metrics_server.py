"""The metrics library against the real ecosystem: promtool checks what it
exposes, a real Prometheus scrapes it (OpenMetrics and text) and the values
are read back through Prometheus' HTTP API, a real Pushgateway receives its
pushes, and TLS, basic auth and misbehaving clients are exercised over
loopback."""
import base64
import gzip
import json
import re
import select
import socket
import ssl
import subprocess
import time
import urllib.parse

import pytest

from conftest import binary
from servers import Prometheus, Process, Pushgateway, free_port, http, wait_until


def exporter(procs, tmp_path, *flags, name="exporter"):
    port = free_port()
    p = procs(Process, [binary("metrics-demo"), f"--web.listen-address=127.0.0.1:{port}", *flags], str(tmp_path), name)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http(url + "/-/healthy")[0] == 200 or None, what="the exporter")
    return p, port, url


def test_promtool_accepts_what_we_expose(procs, tmp_path):
    _, _, url = exporter(procs, tmp_path)
    status, headers, body = http(url + "/metrics", {"Accept": "text/plain"})
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_content_negotiation_and_gzip(procs, tmp_path):
    _, _, url = exporter(procs, tmp_path)
    status, headers, body = http(url + "/metrics", {
        "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"})
    assert headers["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert body.endswith(b"# EOF\n")
    assert b"\ndemo_ticks_created " in body
    status, headers, body = http(url + "/metrics", {"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
    assert b"demo_loss 0.25\n" in gzip.decompress(body)


def test_paths_and_methods(procs, tmp_path):
    _, _, url = exporter(procs, tmp_path)
    assert http(url + "/nope")[0] == 404
    status, headers, _ = http(url + "/metrics", method="POST", data=b"x")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, _, body = http(url + "/metrics", method="HEAD")
    assert status == 200 and body == b""
    status, _, body = http(url + "/")
    assert status == 200 and b'href="/metrics"' in body
    assert http(url + "/-/healthy")[2] == b"OK\n"


def test_prometheus_scrapes_openmetrics_and_text(procs, tmp_path):
    _, om_port, _ = exporter(procs, tmp_path, name="om")
    _, text_port, _ = exporter(procs, tmp_path, "--text-only", name="text")
    prom = procs(Prometheus, str(tmp_path), [
        {"job_name": "om", "static_configs": [{"targets": [f"127.0.0.1:{om_port}"]}]},
        {"job_name": "text", "static_configs": [{"targets": [f"127.0.0.1:{text_port}"]}]},
    ])
    up = prom.wait_for("up == 1", count=2)
    assert {s["metric"]["job"] for s in up} == {"om", "text"}
    for job in ["om", "text"]:
        fixed = prom.wait_for(f'demo_fixed{{job="{job}"}}', count=2)
        by_kind = {s["metric"]["kind"]: float(s["value"][1]) for s in fixed}
        assert by_kind == {'a "quoted" \\ value\nnext line': 42.5, "plain": -3.0}
        assert float(prom.wait_for(f'demo_step_seconds_count{{job="{job}"}}')[0]["value"][1]) == 4
        assert float(prom.wait_for(f'demo_step_seconds_sum{{job="{job}"}}')[0]["value"][1]) == 101.05
        le = {s["metric"]["le"]: float(s["value"][1]) for s in prom.wait_for(f'demo_step_seconds_bucket{{job="{job}"}}', count=4)}
        assert le == {"0.1": 1, "1.0": 3, "2.5": 3, "+Inf": 4}
        assert prom.wait_for(f'demo_build_info{{job="{job}",version="1.0"}}')
        assert float(prom.wait_for(f'process_resident_memory_bytes{{job="{job}"}}')[0]["value"][1]) > 1e5
        ticks = prom.wait_for(f'increase(demo_ticks_total{{job="{job}"}}[5s]) > 0', timeout=30)
        assert ticks
    # which format each scrape used shows in the metadata Prometheus kept: OpenMetrics
    # names a counter family without _total and has an info type
    def metadata(job):
        status, _, body = http(prom.url + "/api/v1/targets/metadata?" +
                               urllib.parse.urlencode({"match_target": f'{{job="{job}"}}'}))
        return {m["metric"]: m["type"] for m in json.loads(body)["data"]}
    om, text = metadata("om"), metadata("text")
    assert om["demo_ticks"] == "counter" and om["demo_build"] == "info"
    assert text["demo_ticks_total"] == "counter" and text["demo_build_info"] == "gauge"


def test_pushgateway_put_post_delete(procs, tmp_path):
    gw = procs(Pushgateway, str(tmp_path))

    def push(*flags):
        result = subprocess.run([binary("metrics-demo"), "--push", gw.url, "--job", "tw-test", "--group", "rank=0",
                                 "--group", "path=a/b", *flags], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr

    push("--push-method", "put", "--set", "a")
    text = gw.metrics()
    assert 'demo_loss{instance="",job="tw-test",path="a/b",rank="0"} 0.25' in text
    push("--push-method", "post", "--set", "b")
    text = gw.metrics()
    assert 'demo_other{instance="",job="tw-test",path="a/b",rank="0"} 7' in text
    assert 'demo_loss{instance="",job="tw-test",path="a/b",rank="0"} 0.25' in text  # POST merges
    push("--push-method", "put", "--set", "b")
    text = gw.metrics()
    assert "demo_other{" in text and "demo_loss{" not in text  # PUT replaces the group
    push("--push-method", "delete")
    assert "demo_other{" not in gw.metrics()


def test_dead_pushgateway_fails_clearly(tmp_path):
    port = free_port()  # nothing listens there
    start = time.monotonic()
    result = subprocess.run([binary("metrics-demo"), "--push", f"http://127.0.0.1:{port}", "--retries", "1",
                             "--push-timeout", "1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}/metrics/job/metrics-demo" in result.stderr
    assert "Could not connect" in result.stderr or "Couldn't connect" in result.stderr
    assert time.monotonic() - start < 20


def test_pushgateway_credentials_are_never_printed(tmp_path):
    port = free_port()  # nothing listens there
    result = subprocess.run([binary("metrics-demo"), "--push", f"http://pusher:s3cretpw@127.0.0.1:{port}",
                             "--retries", "1", "--push-timeout", "1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}/metrics/job/metrics-demo" in result.stderr
    assert "s3cretpw" not in result.stderr and "pusher" not in result.stderr, result.stderr


def test_pushgateway_error_body_is_reported(procs, tmp_path):
    gw = procs(Pushgateway, str(tmp_path))
    # a grouping label that collides with a pushed metric's label: the gateway refuses
    result = subprocess.run([binary("metrics-demo"), "--push", gw.url, "--group", "kind=x", "--push-method", "put"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "HTTP 400" in result.stderr


def test_port_in_use_is_a_clear_error(procs, tmp_path):
    _, port, _ = exporter(procs, tmp_path)
    result = subprocess.run([binary("metrics-demo"), f"--web.listen-address=127.0.0.1:{port}", "--duration", "1"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"127.0.0.1:{port}: Address already in use" in result.stderr


def test_ipv6_loopback(procs, tmp_path):
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    port = free_port()
    p = procs(Process, [binary("metrics-demo"), f"--web.listen-address=[::1]:{port}"], str(tmp_path), "v6")
    wait_until(lambda: http(f"http://[::1]:{port}/-/healthy")[0] == 200 or None, what="the IPv6 exporter")


def make_tls(tmp_path):
    key, cert = tmp_path / "server.key", tmp_path / "server.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def bcrypt(password):
    import crypt  # Debian's Python 3.11 still ships it; libxcrypt does bcrypt
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))


def test_tls_and_basic_auth(procs, tmp_path):
    cert, key = make_tls(tmp_path)
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n"
                      f"basic_auth_users:\n  alice: '{bcrypt('s3cret')}'\n"
                      "http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    port = free_port()
    procs(Process, [binary("metrics-demo"), f"--web.listen-address=127.0.0.1:{port}",
                    f"--web.config.file={config}"], str(tmp_path), "tls")
    ctx = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{port}/metrics"

    def auth(user, pw):
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}

    wait_until(lambda: http(url, auth("alice", "s3cret"), context=ctx)[0] == 200 or None, what="the TLS exporter")
    status, headers, body = http(url, auth("alice", "s3cret"), context=ctx)
    assert status == 200 and b"demo_loss 0.25" in body
    assert headers["X-Frame-Options"] == "deny"
    for h in [auth("alice", "wrong"), auth("mallory", "s3cret"), {}]:
        status, headers, body = http(url, h, context=ctx)
        assert status == 401
        assert headers["WWW-Authenticate"].startswith("Basic realm=\"trainwatch\"")
        assert b"demo_loss" not in body
    with pytest.raises(Exception):  # plain HTTP to a TLS port gets nothing useful
        status, _, body = http(f"http://127.0.0.1:{port}/metrics", auth("alice", "s3cret"), timeout=3)
        assert status != 200
    prom = procs(Prometheus, str(tmp_path), [{
        "job_name": "tls", "scheme": "https", "tls_config": {"ca_file": str(cert)},
        "basic_auth": {"username": "alice", "password": "s3cret"},
        "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}])
    assert prom.wait_for('demo_loss{job="tls"}')


def tls_exporter(procs, tmp_path, cert, key, settings, name):
    config = tmp_path / f"{name}.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n{settings}")
    port = free_port()
    p = procs(Process, [binary("metrics-demo"), f"--web.listen-address=127.0.0.1:{port}",
                        f"--web.config.file={config}"], str(tmp_path), name)
    wait_until(lambda: p.proc.poll() is None and handshake(port), what=f"the TLS exporter {name}")
    return port


def handshake(port, *flags):
    """openssl s_client's handshake with the given flags: the protocol and
    cipher it agreed, or None when the server refused."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-brief", *flags],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    version = re.search(r"Protocol version: (\S+)", r.stdout + r.stderr)
    cipher = re.search(r"Ciphersuite: (\S+)", r.stdout + r.stderr)
    return (version.group(1), cipher.group(1)) if r.returncode == 0 and version else None


def test_tls_versions_suites_and_curves_are_honoured(procs, tmp_path):
    cert, key = make_tls(tmp_path)
    only12 = tls_exporter(procs, tmp_path, cert, key, "  max_version: TLS12\n", "only12")
    assert handshake(only12, "-tls1_3") is None
    assert handshake(only12, "-tls1_2")[0] == "TLSv1.2"
    only13 = tls_exporter(procs, tmp_path, cert, key, "  min_version: TLS13\n  max_version: TLS13\n", "only13")
    assert handshake(only13, "-tls1_2") is None
    assert handshake(only13, "-tls1_3")[0] == "TLSv1.3"
    suites = tls_exporter(procs, tmp_path, cert, key,
                          "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
                          "  curve_preferences: [X25519]\n", "suites")
    assert handshake(suites, "-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384") is None
    assert handshake(suites, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256") == (
        "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    assert handshake(suites, "-tls1_2", "-groups", "P-384") is None
    assert handshake(suites, "-tls1_2", "-groups", "X25519")[0] == "TLSv1.2"


def test_bad_web_config_is_refused_before_serving(tmp_path):
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n")
    result = subprocess.run([binary("metrics-demo"), f"--web.config.file={config}", "--web.listen-address=127.0.0.1:0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"{config}: line 4: tls_server_config.client_auth_type is not supported" in result.stderr
    config.write_text("basic_auth_users:\n  bob: plaintext\n")
    result = subprocess.run([binary("metrics-demo"), f"--web.config.file={config}", "--web.listen-address=127.0.0.1:0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "must be a bcrypt hash" in result.stderr
    config.write_text("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  cipher_suites: [TLS_BOGUS]\n")
    result = subprocess.run([binary("metrics-demo"), f"--web.config.file={config}", "--web.listen-address=127.0.0.1:0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "line 4: cipher_suites: unknown cipher suite TLS_BOGUS" in result.stderr


def test_slow_and_garbage_clients_do_not_stop_scrapes(procs, tmp_path):
    _, port, url = exporter(procs, tmp_path)
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and then nothing, for now
    garbage = socket.create_connection(("127.0.0.1", port))
    garbage.sendall(b"\x00\xff\xfeNOT HTTP AT ALL\r\n\r\n")
    huge = socket.create_connection(("127.0.0.1", port))
    huge.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
    start = time.monotonic()
    for _ in range(5):
        slow.sendall(b"X-Dribble: 1\r\n")
        status, _, body = http(url + "/metrics", timeout=5)
        assert status == 200 and b"demo_loss 0.25" in body
    assert time.monotonic() - start < 5
    # the bad clients get an error or are dropped, at the latest at the 10 s connection timeout
    for sock, codes in [(garbage, [b"400", b"505"]), (huge, [b"431", b"413"])]:
        sock.settimeout(15)
        answer = sock.recv(100)
        assert answer == b"" or answer[9:12] in codes, answer
    for s in (slow, garbage, huge):
        s.close()
    assert http(url + "/metrics")[0] == 200


def server_has_read(server_port, client):
    """Whether the server has read everything this client socket sent: its
    side of the connection has an empty receive queue (/proc/net/tcp)."""
    client_port = client.getsockname()[1]
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                return int(queues.split(":")[1], 16) == 0
    return False


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_cached_login_is_answered_while_password_checks_are_in_flight(procs, tmp_path):
    import crypt
    config = tmp_path / "web.yml"
    slow = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2 ** 13))  # cost 13
    config.write_text(f"basic_auth_users:\n  alice: '{slow}'\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs(Process, [binary("metrics-demo"), f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={config}"],
          str(tmp_path), "auth")
    wait_until(lambda: http(url + "/-/healthy")[0] == 401 or None, what="the exporter")
    assert http(url + "/metrics", {"Authorization": basic("alice", "s3cret")}, timeout=60)[0] == 200  # now cached
    wrong = []
    for i in range(4):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {basic('alice', f'guess{i}')}\r\n"
                     "Connection: close\r\n\r\n".encode())
        wrong.append(sock)
    # the server has taken up a wrong guess: its bcrypt is under way
    wait_until(lambda: any(server_has_read(port, s) for s in wrong), what="the server to read a wrong guess")
    status, _, body = http(url + "/metrics", {"Authorization": basic("alice", "s3cret")}, timeout=60)
    assert status == 200 and b"demo_loss 0.25" in body
    # answered while every wrong guess is still being checked
    readable, _, _ = select.select(wrong, [], [], 0)
    assert readable == []
    for sock in wrong:
        sock.settimeout(60)
        assert sock.recv(12) == b"HTTP/1.1 401"
        sock.close()


def trickle_start(port, count):
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    return socks


def trickle(socks):
    """One header line on each connection; returns those the server has not closed."""
    alive = []
    for s in socks:
        try:
            s.sendall(b"X-Dribble: 1\r\n")
            alive.append(s)
        except OSError:
            s.close()
    return alive


def test_scrape_gets_in_beside_70_trickling_clients_from_its_own_address(procs, tmp_path):
    import threading
    _, port, url = exporter(procs, tmp_path)
    socks = trickle_start(port, 70)  # more than the 64 connections the server takes
    result, done = {}, threading.Event()

    def scrape():
        try:
            result["answer"] = http(url + "/metrics", timeout=30)
        except OSError as e:
            result["error"] = e
        done.set()

    threading.Thread(target=scrape, daemon=True).start()
    while not done.wait(0.5):  # they keep trickling for as long as the scrape takes
        socks = trickle(socks)
    assert "answer" in result, result
    status, _, body = result["answer"]
    assert status == 200 and b"demo_loss 0.25" in body
    # still trickling when the scrape was answered: room was made, nobody timed out
    assert len(trickle(socks)) >= 8
    for s in socks:
        s.close()


def test_header_deadline_closes_a_steady_trickle(procs, tmp_path):
    _, port, url = exporter(procs, tmp_path)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    sock.settimeout(0.5)

    def closed():
        try:
            sock.sendall(b"X-Dribble: 1\r\n")  # a byte well within every idle timeout
            return sock.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True

    wait_until(closed, timeout=40, interval=0, what="the server to close a connection that never ends its headers")
    sock.close()
    assert http(url + "/metrics")[0] == 200


def test_start_up_line_says_https_when_serving_tls(tmp_path):
    """trainwatch run over TLS names the scheme a browser or Prometheus needs;
    plain HTTP keeps the bare address (failed before: no https://)."""
    cert, key = make_tls(tmp_path)
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    fetch = ("import ssl, sys, urllib.request\n"
             "address = open(sys.argv[1]).read().strip()\n"
             "ctx = ssl.create_default_context(cafile=sys.argv[2])\n"
             "print(urllib.request.urlopen('https://' + address + '/metrics', context=ctx).status)\n")
    address_file = tmp_path / "address"
    r = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0",
                        f"--web.config.file={config}", "--web.address-file", str(address_file), "--",
                        "python3", "-c", fetch, str(address_file), str(cert)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "200\n"
    line = re.search(r"^trainwatch run: serving /metrics on (\S+)$", r.stderr, re.M)
    assert line and line.group(1) == "https://" + address_file.read_text().strip(), r.stderr
    plain = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--", "true"],
                           capture_output=True, text=True, timeout=120)
    assert re.search(r"^trainwatch run: serving /metrics on 127\.0\.0\.1:\d+$", plain.stderr, re.M), plain.stderr
