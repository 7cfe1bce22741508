#!/usr/bin/env python3
"""The stall other clients see while one client stores a big value (issue 21).

    python3 big_write_stall.py PORT [--mib 64] [--rounds 3] [--pid PID]

Each round: a PING probe every millisecond on its own connection, while another client sends
`SET big <MIB MiB>` and reads the reply. Prints per round the SET's time (first byte sent to
reply read), the probe's maximum while it ran, and the executor time SLOWLOG recorded for the
SET (the part no other client could be served in); with --pid, the server's peak RSS (VmHWM)
over the rounds above its RSS before them. Then the maxima over rounds.
"""
import argparse, multiprocessing as mp, socket, time


def conn(port):
    s = socket.create_connection(('127.0.0.1', port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def call(s, *args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    s.sendall(b''.join(out))
    return read_reply(s)


def read_reply(s):
    data = b''
    while not data.endswith(b'\r\n'):
        chunk = s.recv(1 << 16)
        if not chunk:
            raise EOFError
        data += chunk
    return data


def prober(port, stop, ready, probe_max):
    s = conn(port)
    ready.set()
    worst = 0.0
    while not stop.is_set():
        t = time.perf_counter()
        s.sendall(b'PING\r\n')
        read_reply(s)
        worst = max(worst, time.perf_counter() - t)
        time.sleep(0.001)
    probe_max.value = worst


def vm(pid, field):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('port', type=int)
    ap.add_argument('--mib', type=int, default=64)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--pid', type=int, help='server pid: report peak RSS above the RSS before the rounds')
    a = ap.parse_args()
    value = b'v' * (a.mib << 20)
    ctl = conn(a.port)
    call(ctl, 'DEL', 'big')
    call(ctl, 'CONFIG', 'SET', 'slowlog-log-slower-than', '0')
    rss_before = vm(a.pid, 'VmRSS') if a.pid else 0
    writer = conn(a.port)
    sets, probes, slow = [], [], []
    for r in range(a.rounds):
        call(ctl, 'SLOWLOG', 'RESET')
        stop, ready, probe_max = mp.Event(), mp.Event(), mp.Value('d', 0.0)
        p = mp.Process(target=prober, args=(a.port, stop, ready, probe_max))
        p.start()
        ready.wait()
        time.sleep(0.05)
        t = time.perf_counter()
        reply = call(writer, b'SET', b'big', value)
        took = time.perf_counter() - t
        time.sleep(0.01)
        stop.set()
        p.join()
        assert reply == b'+OK\r\n', reply
        # The SET's own entry: the one whose first argument is SET (entries hold the args).
        log = call_raw_slowlog(ctl)
        sets.append(took * 1000)
        probes.append(probe_max.value * 1000)
        slow.append(log / 1000)
        print(f'round {r + 1}: SET {took * 1000:.1f} ms, probe max {probe_max.value * 1000:.2f} ms, '
              f'slowlog SET {log / 1000:.2f} ms')
    print(f'max over rounds: SET {max(sets):.1f} ms, probe max {max(probes):.2f} ms, slowlog SET {max(slow):.2f} ms')
    if a.pid:
        peak = vm(a.pid, 'VmHWM')
        print(f'peak RSS above the start: {(peak - rss_before) / 2**20:.1f} MiB (value {a.mib} MiB)')
    call(ctl, 'CONFIG', 'SET', 'slowlog-log-slower-than', '10000')


def call_raw_slowlog(ctl):
    """The duration (µs) SLOWLOG recorded for the last SET, read from `SLOWLOG GET 128`."""
    ctl.sendall(b'SLOWLOG GET 128\r\n')
    time.sleep(0.05)
    data = b''
    ctl.settimeout(0.2)
    try:
        while True:
            chunk = ctl.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    ctl.settimeout(None)
    # Each entry: *6 (7.0) of id, timestamp, duration, args, addr, name; args start with "$3\r\nSET".
    lines = data.split(b'\r\n')
    for i, line in enumerate(lines):
        if line == b'SET' and i >= 6:
            # walk back to the entry's duration: the integer two lines before the args' "*N"
            for j in range(i - 1, max(0, i - 8), -1):
                if lines[j].startswith(b'*') and lines[j - 1].startswith(b':'):
                    return int(lines[j - 1][1:])
    return -1


if __name__ == '__main__':
    main()
