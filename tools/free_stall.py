#!/usr/bin/env python3
"""The stall other clients see while big keys are freed (issue 21's scope: deletion, active
expiry, FLUSHALL and eviction keep the same bound as big reads).

    python3 free_stall.py --server BIN [--redis redis-server] [--scenario S ...] [--rounds 3]

Starts ferrodis (BIN) and redis-server side by side (persistence off, own ports), and for each
scenario and round loads the data with pipelined commands, then runs the operation while a PING
probe on its own connection sends one PING every millisecond; prints the probe's maximum round
trip while the operation ran (and 300 ms after, for frees that happen later), per server, and the
maxima over rounds. Scenarios:

  flushall      FLUSHALL (sync) of 2M small keys
  flushall-big  FLUSHALL (sync) of 40 sets of 50k members
  del-big       DEL of one set of 2M members
  overwrite-big SET over one set of 2M members (the old value is freed)
  expire-big    40 sets of 50k members given a 1 ms TTL at once: active expiry removes them
  evict-big     maxmemory set below the data (allkeys-random) with 40 sets of 50k members
  idle          nothing (the machine's noise floor)
"""
import argparse, os, shutil, socket, subprocess, tempfile, threading, time


def conn(port):
    s = socket.create_connection(('127.0.0.1', port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def enc(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


def read_replies(s, n):
    """Reads n simple replies (status, integer or error lines) and returns the last."""
    buf, seen, last = b'', 0, b''
    while seen < n:
        d = s.recv(1 << 20)
        if not d:
            raise EOFError
        buf += d
        lines = buf.split(b'\r\n')
        buf = lines.pop()
        for line in lines:
            seen += 1
            last = line
    return last


def cmd(s, *args):
    s.sendall(enc(*args))
    return read_replies(s, 1)


def pipeline(s, cmds, chunk=5000):
    for i in range(0, len(cmds), chunk):
        part = cmds[i:i + chunk]
        s.sendall(b''.join(part))
        read_replies(s, len(part))


def wait_ready(port, deadline=20):
    end = time.time() + deadline
    while time.time() < end:
        try:
            s = conn(port)
            if cmd(s, 'PING') == b'+PONG':
                s.close()
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f'server on {port} did not start')


def big_sets(s, keys, members, ttl_ms=None):
    for k in range(keys):
        name = f'big:{k}'
        cmds = [enc('SADD', name, *[f'm{j}' for j in range(i, min(i + 1000, members))])
                for i in range(0, members, 1000)]
        pipeline(s, cmds, chunk=50)
        if ttl_ms:
            cmd(s, 'PEXPIRE', name, ttl_ms)


def load(s, scenario):
    if scenario == 'flushall':
        cmds = [enc('MSET', *sum(([f'k:{i + j}', 'v'] for j in range(100)), [])) for i in range(0, 2_000_000, 100)]
        pipeline(s, cmds, chunk=200)
    elif scenario == 'flushall-big':
        big_sets(s, 40, 50_000)
    elif scenario in ('del-big', 'overwrite-big'):
        big_sets(s, 1, 2_000_000)
    elif scenario == 'expire-big':
        big_sets(s, 40, 50_000, ttl_ms=None)
    elif scenario == 'evict-big':
        cmd(s, 'CONFIG', 'SET', 'maxmemory-policy', 'allkeys-random')
        big_sets(s, 40, 50_000)


def operate(s, scenario):
    """Runs the operation; returns when it is done (for lazy frees, when the effect is seen)."""
    if scenario in ('flushall', 'flushall-big'):
        cmd(s, 'FLUSHALL')
    elif scenario == 'del-big':
        cmd(s, 'DEL', 'big:0')
    elif scenario == 'overwrite-big':
        cmd(s, 'SET', 'big:0', 'x')
    elif scenario == 'expire-big':
        for k in range(40):
            cmd(s, 'PEXPIRE', f'big:{k}', 1)
        end = time.time() + 10
        while int(cmd(s, 'DBSIZE')[1:]) > 0 and time.time() < end:
            time.sleep(0.01)
    elif scenario == 'evict-big':
        used = int(next(l for l in cmd_info(s).splitlines() if l.startswith('used_memory:')).split(':')[1])
        cmd(s, 'CONFIG', 'SET', 'maxmemory', used // 4)
        cmd(s, 'SET', 'trigger', 'x')
        cmd(s, 'CONFIG', 'SET', 'maxmemory', 0)
    elif scenario == 'idle':
        time.sleep(1)


def cmd_info(s):
    s.sendall(enc('INFO', 'memory'))
    buf = b''
    while True:
        buf += s.recv(1 << 16)
        if buf.startswith(b'$'):
            n = int(buf[1:buf.index(b'\r\n')])
            head = buf.index(b'\r\n') + 2
            if len(buf) >= head + n + 2:
                return buf[head:head + n].decode()


def probe(port, stop, result):
    s = conn(port)
    worst = 0.0
    while not stop.is_set():
        t = time.perf_counter()
        s.sendall(b'PING\r\n')
        s.recv(64)
        worst = max(worst, (time.perf_counter() - t) * 1000)
        time.sleep(0.001)
    result.append(worst)


def one_round(port, scenario):
    s = conn(port)
    cmd(s, 'FLUSHALL')
    cmd(s, 'CONFIG', 'SET', 'maxmemory', 0)
    load(s, scenario)
    time.sleep(0.3)
    stop, result = threading.Event(), []
    t = threading.Thread(target=probe, args=(port, stop, result))
    t.start()
    time.sleep(0.05)
    started = time.perf_counter()
    operate(s, scenario)
    took = (time.perf_counter() - started) * 1000
    time.sleep(0.3)
    stop.set()
    t.join()
    s.close()
    return took, result[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server', required=True)
    ap.add_argument('--redis', default='redis-server')
    ap.add_argument('--scenario', action='append')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--base', type=int, default=21700)
    args = ap.parse_args()
    scenarios = args.scenario or ['idle', 'flushall', 'flushall-big', 'del-big', 'overwrite-big', 'expire-big',
                                  'evict-big']
    tmp = tempfile.mkdtemp(prefix='free_stall-')
    servers = {}
    procs = []
    try:
        for i, (name, binary) in enumerate([('redis', args.redis), ('ferrodis', args.server)]):
            port = args.base + i
            d = os.path.join(tmp, name)
            os.makedirs(d)
            procs.append(subprocess.Popen([binary, '--port', str(port), '--save', '', '--appendonly', 'no',
                                           '--dir', d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_ready(port)
            servers[name] = port
        print(f'{"scenario":14} {"server":9} ' + ' '.join(f'r{r + 1} op/max ms'.rjust(16) for r in range(args.rounds))
              + '   max probe ms')
        for sc in scenarios:
            for name, port in servers.items():
                cells, worst = [], 0.0
                for _ in range(args.rounds):
                    took, mx = one_round(port, sc)
                    worst = max(worst, mx)
                    cells.append(f'{took:7.1f}/{mx:6.2f}'.rjust(16))
                print(f'{sc:14} {name:9} ' + ' '.join(cells) + f'   {worst:8.2f}', flush=True)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
