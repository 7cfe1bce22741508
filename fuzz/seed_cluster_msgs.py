#!/usr/bin/env python3
"""Seeds the cluster_msg fuzz corpus with well-formed cluster bus frames (Redis 7.0's layout):
PING with gossip and a hostname extension, MEET, FAIL, PUBLISH, UPDATE, FAILOVER_AUTH_REQUEST.
Without them the fuzzer would first have to find the 2256-byte header and its exact length.

  fuzz/seed_cluster_msgs.py OUT_DIR
"""
import os, struct, sys

HEADER_LEN, SLOT_BYTES = 2256, 2048
NAME = b"e37a9c27217bf22a6fcf09b634e73bf58d092f30"


def header(typ, count=0, extensions=0, mflags0=0):
    h = bytearray(b"RCmb") + bytes(4) + struct.pack(">HHHH", 1, 7000, typ, count)
    h += struct.pack(">QQQ", 5, 3, 1234) + NAME + bytes([0xFF] * 16 + [0] * (SLOT_BYTES - 16))
    h += bytes(40) + b"127.0.0.1".ljust(46, b"\0") + struct.pack(">H", extensions) + bytes(30)
    h += struct.pack(">HHH", 0, 17000, 1) + bytes([0, mflags0, 0, 0])
    assert len(h) == HEADER_LEN, len(h)
    return h


def frame(h, body=b""):
    f = h + body
    f[4:8] = struct.pack(">I", len(f))
    return bytes(f)


def gossip(i):
    return NAME[:-1] + bytes([48 + i]) + struct.pack(">II", 1, 2) + b"127.0.0.1".ljust(46, b"\0") + struct.pack(
        ">HHHH", 7001 + i, 17001 + i, 0, 0) + bytes(2)


def main(out):
    os.makedirs(out, exist_ok=True)
    host = b"node-a.example\0"
    ext = struct.pack(">HHI", 0, 0, (8 + len(host) + 7) // 8 * 8) + host
    ext += bytes((8 - len(ext) % 8) % 8)
    frames = {
        "ping": frame(header(0, 2), gossip(0) + gossip(1)),
        "ping_ext": frame(header(0, 1, 1, 4), gossip(0) + ext),
        "meet": frame(header(2)),
        "fail": frame(header(3), NAME),
        "publish": frame(header(4), struct.pack(">II", 2, 5) + b"chhello"),
        "update": frame(header(7), struct.pack(">Q", 9) + NAME + bytes([0xF0] * SLOT_BYTES)),
        "auth_request": frame(header(5)),
    }
    for name, f in frames.items():
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(f)


if __name__ == "__main__":
    main(sys.argv[1])
