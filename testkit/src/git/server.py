#!/usr/bin/env python3
"""The tests' Git server: smart HTTP over TLS, `git http-backend` (Git's own server) as CGI.

    server.py ROOT CERT KEY  ->  prints the port it listens on (127.0.0.1), then serves the
                                bare repositories under ROOT at https://127.0.0.1:PORT/<name>

Two more paths for the tests of a client's bounds: /redirect-http/<port>/<name> answers a
redirect to http://127.0.0.1:<port>/<name> (plain HTTP), and /slow/<name> serves <name> in 64 KiB
pieces 20 ms apart (a fetch then takes long enough to be stopped while it runs).

One request per connection (HTTP/1.0); chunked request bodies are decoded, as Git clients
send them. Never reaches the network: it listens on the loopback only.
"""
import http.server
import os
import ssl
import subprocess
import sys
import time

ROOT, CERT, KEY = sys.argv[1:4]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.backend()

    def do_POST(self):
        self.backend()

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def backend(self):
        path, _, query = self.path.partition("?")
        if path.startswith("/redirect-http/"):
            self.send_response(302)
            port, _, rest = self.path[len("/redirect-http/"):].partition("/")
            self.send_header("Location", f"http://127.0.0.1:{port}/{rest}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        slow = path.startswith("/slow/")
        if slow:
            path = path[len("/slow"):]
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(
            ["git", "http-backend"], input=self.body(), env=env, capture_output=True
        )
        head, _, payload = out.stdout.partition(b"\r\n\r\n")
        if not _:
            self.send_error(500, out.stderr.decode(errors="replace")[:200])
            return
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            else:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not slow:
            self.wfile.write(payload)
            return
        try:
            for start in range(0, len(payload), 64 * 1024):
                self.wfile.write(payload[start:start + 64 * 1024])
                self.wfile.flush()
                time.sleep(0.02)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass

    def log_message(self, format, *args):
        sys.stderr.write("git-server: " + (format % args) + "\n")


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
