"""Minimal RESP3 client for the generator: keeps reply types (map, set, simple/bulk string)."""
import socket


class Conn:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        """One reply as (type, value): type is one of + - : $ * % ~ _ , #."""
        line = self._line()
        t, rest = chr(line[0]), line[1:]
        if t in "+-":
            return (t, rest.decode())
        if t == ":":
            return (t, int(rest))
        if t == "$":
            n = int(rest)
            return ("_", None) if n < 0 else ("$", self._exact(n).decode())
        if t in "*~":
            n = int(rest)
            return ("_", None) if n < 0 else (t, [self.read() for _ in range(n)])
        if t == "%":
            return (t, [(self.read(), self.read()) for _ in range(int(rest))])
        if t == "_":
            return (t, None)
        raise ValueError("unexpected reply type %r" % t)

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()
