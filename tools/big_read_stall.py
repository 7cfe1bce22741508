#!/usr/bin/env python3
"""The stall other clients see during one client's big read (issue 21, acceptance 1).

    python3 big_read_stall.py PORT KIND [--n 1500000] [--rounds 5] [--no-writer]

Loads a collection of N elements for KIND (zrange, zrangews, zrevrangebyscore, sunion, sinter,
sdiff, smembers, sort (a list), sortset, sortzset (small integers), lrange, hgetall, xrange, xrevrange, dumpset, dumpzset, keys, keyspat: a stream, N keys of
the keyspace, ...), then for each round: a PING probe every millisecond on its own connection, a
writer changing the collection on another (unless --no-writer), and the big read on a third,
its whole reply read. KIND idle runs no read (a one-second window, no writer): the probe's
maximum there is the machine's noise floor. Prints per round the read's time and the probe's maximum while it ran,
then the maxima over rounds.
"""
import argparse, multiprocessing as mp, os, socket, time

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

class Reader:
    def __init__(self, s):
        self.s, self.buf, self.pos = s, bytearray(), 0
    def fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError
        if self.pos > (1 << 20):
            del self.buf[:self.pos]; self.pos = 0
        self.buf += d
    def line(self):
        while True:
            i = self.buf.find(b'\r\n', self.pos)
            if i >= 0:
                l = bytes(self.buf[self.pos:i]); self.pos = i + 2; return l
            self.fill()
    def skip(self, n):
        while len(self.buf) - self.pos < n:
            self.fill()
        self.pos += n
    def reply(self):
        """Reads one reply, returns the element count of an aggregate (else 0)."""
        l = self.line(); t = l[:1]
        if t in (b'*', b'~', b'%'):
            n = int(l[1:]) * (2 if t == b'%' else 1)
            for _ in range(n):
                self.reply()
            return n
        if t == b'$':
            n = int(l[1:])
            if n >= 0:
                self.skip(n + 2)
        return 0

def value(r):
    """One reply as a Python value (small replies only: SLOWLOG GET)."""
    l = r.line(); t = l[:1]
    if t in (b'*', b'~'):
        return [value(r) for _ in range(max(0, int(l[1:])))]
    if t == b'$':
        n = int(l[1:])
        if n < 0:
            return None
        while len(r.buf) - r.pos < n + 2:
            r.fill()
        v = bytes(r.buf[r.pos:r.pos + n]); r.pos += n + 2; return v
    if t == b':':
        return int(l[1:])
    return l[1:]

def slowest(port):
    """The slowest duration (us) the server logged per command name since SLOWLOG RESET."""
    s = conn(port); r = Reader(s); s.sendall(enc('SLOWLOG', 'GET', 100000)); entries = value(r); s.close()
    worst = {}
    for e in entries:
        name = e[3][0].decode().upper()
        worst[name] = max(worst.get(name, 0), e[2])
    return worst

def run(s, r, *args):
    s.sendall(enc(*args)); return r.reply()

def load(port, kind, n):
    s = conn(port); r = Reader(s)
    run(s, r, 'FLUSHALL')
    batch = 10000
    def bulk(cmd, per=False):
        # `per`: a batch is one command per element (its replies read one by one).
        pending = 0
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            s.sendall(cmd(lo, hi)); pending += 1
            if pending >= 8:
                for _ in range(batch if per else 1):
                    r.reply()
                pending -= 1
        for k in range(pending):
            for _ in range(batch if per else 1):
                r.reply()
    if kind == 'idle':
        pass
    elif kind == 'hgetall':
        bulk(lambda lo, hi: enc('HSET', 'h', *[x for i in range(lo, hi) for x in ('field:%d' % i, 'value:%d' % i)]))
    elif kind in ('sort', 'lrange'):
        bulk(lambda lo, hi: enc('RPUSH', 'l', *[i * 7919 % 1000003 for i in range(lo, hi)]))
    elif kind == 'sortset':
        bulk(lambda lo, hi: enc('SADD', 'si', *[i * 7919 % 1000003 for i in range(lo, hi)]))
    elif kind == 'sortzset':
        bulk(lambda lo, hi: enc('ZADD', 'zi', *[x for i in range(lo, hi) for x in (i, i * 7919 % 1000003)]))
    elif kind.startswith('x'):
        # One pipelined XADD per entry, IDs 1-0 .. N-0 (three fields, as bigkey streams often have).
        bulk(lambda lo, hi: b''.join(enc('XADD', 'x', '%d-0' % (i + 1), 'f', i, 'g', 'member:%d' % i, 'h', 'abcdefghij') for i in range(lo, hi)), per=True)
    elif kind.startswith('keys'):
        bulk(lambda lo, hi: enc('MSET', *[x for i in range(lo, hi) for x in ('key:%d' % i, i)]))
    elif kind.startswith('z') or kind == 'dumpzset':
        bulk(lambda lo, hi: enc('ZADD', 'z', *[x for i in range(lo, hi) for x in (i % 100000 + 0.5, 'member:%d' % i)]))
    else:
        bulk(lambda lo, hi: enc('SADD', 'a', *['member:%d' % i for i in range(lo, hi)]))
        bulk(lambda lo, hi: enc('SADD', 'b', *['member:%d' % i for i in range(lo + n // 2, hi + n // 2)]))
    s.close()

READS = {
    'zrange': ('ZRANGE', 'z', 0, -1),
    'zrangews': ('ZRANGE', 'z', 0, -1, 'WITHSCORES'),
    'zrevrangebyscore': ('ZREVRANGEBYSCORE', 'z', '+inf', '-inf', 'WITHSCORES'),
    'smembers': ('SMEMBERS', 'a'),
    'sort': ('SORT', 'l'),
    'sortset': ('SORT', 'si'),
    'sortzset': ('SORT', 'zi'),
    'lrange': ('LRANGE', 'l', 0, -1),
    'hgetall': ('HGETALL', 'h'),
    'sunion': ('SUNION', 'a', 'b'),
    'sinter': ('SINTER', 'a', 'b'),
    'sdiff': ('SDIFF', 'a', 'b'),
    'xrange': ('XRANGE', 'x', '-', '+'),
    'xrevrange': ('XREVRANGE', 'x', '+', '-'),
    'dumpset': ('DUMP', 'a'),
    'dumpzset': ('DUMP', 'z'),
    'keys': ('KEYS', '*'),
    'keyspat': ('KEYS', 'key:1*'),
    'idle': None,
}

def prober(port, stop, reset, probe_max, probe_p999, rt):
    """PING every millisecond; the maximum round trip since `reset` was set goes to probe_max,
    the 99.9th percentile of those round trips to probe_p999 when stopped."""
    if rt:
        # SCHED_FIFO: woken, the probe preempts the reader and the writer on its CPU at once, so
        # what it measures is the server's delay, not its own wait for a time slice.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    s = conn(port); r = Reader(s); mx = 0.0; counting = False; samples = []
    while not stop.is_set():
        t = time.perf_counter(); s.sendall(b'PING\r\n'); r.line(); d = (time.perf_counter() - t) * 1000
        if not counting and reset.is_set():
            counting = True; mx = 0.0
        if counting:
            samples.append(d)
            if d > mx:
                mx = d; probe_max.value = mx
        time.sleep(max(0.0, 0.001 - d / 1000))
    if samples:
        samples.sort(); probe_p999.value = samples[min(len(samples) - 1, int(len(samples) * 0.999))]

def writer(port, kind, n, stop):
    """Changes the collection under the read: one add and one removal every half millisecond."""
    s = conn(port); r = Reader(s); i = 0
    while not stop.is_set():
        if kind in ('sort', 'lrange'):
            run(s, r, 'LPUSH', 'l', i); run(s, r, 'RPOP', 'l')
        elif kind == 'sortset':
            run(s, r, 'SADD', 'si', n + i); run(s, r, 'SREM', 'si', i * 7919 % n)
        elif kind == 'sortzset':
            run(s, r, 'ZADD', 'zi', i, n + i); run(s, r, 'ZREM', 'zi', i * 7919 % n)
        elif kind == 'hgetall':
            run(s, r, 'HSET', 'h', 'w:%d' % i, i); run(s, r, 'HDEL', 'h', 'field:%d' % (i * 7919 % n))
        elif kind.startswith('x'):
            run(s, r, 'XADD', 'x', '*', 'f', i); run(s, r, 'XDEL', 'x', '%d-0' % (i * 7919 % n + 1))
        elif kind.startswith('keys'):
            run(s, r, 'SET', 'w:%d' % i, i); run(s, r, 'DEL', 'key:%d' % (i * 7919 % n))
        elif kind.startswith('z') or kind == 'dumpzset':
            run(s, r, 'ZADD', 'z', i % 7, 'w:%d' % i); run(s, r, 'ZREM', 'z', 'member:%d' % (i * 7919 % n))
        else:
            run(s, r, 'SADD', 'a', 'w:%d' % i); run(s, r, 'SREM', 'b', 'member:%d' % (i * 7919 % n + n // 2))
        i += 1
        time.sleep(0.0005)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('port', type=int); ap.add_argument('kind', choices=READS)
    ap.add_argument('--n', type=int, default=1500000); ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--rss-pid', type=int, help='report the peak RSS over the rounds above the RSS before them (VmHWM), and the collection\'s size (RSS added by loading it)')
    ap.add_argument('--no-writer', action='store_true'); ap.add_argument('--no-load', action='store_true')
    ap.add_argument('--rt-probe', action='store_true', help='run the probe SCHED_FIFO (needs root; run the server and this script on different CPUs with taskset)')
    ap.add_argument('--cmd', help='the read to run instead of KIND\'s (space-separated words, e.g. "SORT l ALPHA LIMIT 0 10")')
    a = ap.parse_args()
    def status(field):
        for line in open(f'/proc/{a.rss_pid}/status'):
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    # The collection's size: what loading it added to the RSS (acceptance 4 bounds the peak
    # during the reads, above steady state, by it).
    before_load = status('VmRSS') if a.rss_pid and not a.no_load else None
    if not a.no_load:
        load(a.port, a.kind, a.n)
    # The server's own measure of how long each command held it (load on a shared machine
    # stretches the probe's round trips; this is what one command costs every other client).
    s = conn(a.port); r = Reader(s)
    for cmd in (('CONFIG', 'SET', 'slowlog-log-slower-than', 200), ('CONFIG', 'SET', 'slowlog-max-len', 100000), ('SLOWLOG', 'RESET')):
        run(s, r, *cmd)
    s.close()
    if a.rss_pid:
        steady = status('VmRSS')
        with open(f'/proc/{a.rss_pid}/clear_refs', 'w') as f:
            f.write('5')  # resets VmHWM, the peak RSS, to the RSS now
    worst_probe = worst_read = worst_p999 = 0.0
    for rnd in range(a.rounds):
        # The probe and the writer are processes of their own: threads would share this one's
        # interpreter lock with the reader parsing millions of elements, and measure that.
        stop = mp.Event(); reset = mp.Event(); probe_max = mp.Value('d', 0.0); probe_p999 = mp.Value('d', 0.0)
        procs = [mp.Process(target=prober, args=(a.port, stop, reset, probe_max, probe_p999, a.rt_probe))]
        if not a.no_writer and a.kind != 'idle':
            procs.append(mp.Process(target=writer, args=(a.port, a.kind, a.n, stop)))
        for pr in procs:
            pr.start()
        time.sleep(0.5)
        reset.set(); time.sleep(0.01)
        s = conn(a.port); r = Reader(s)
        t = time.perf_counter()
        if READS[a.kind] is None:
            time.sleep(1.0); cnt = 0
        else:
            cnt = run(s, r, *(a.cmd.split() if a.cmd else READS[a.kind]))
        dt = time.perf_counter() - t
        pm = probe_max.value
        stop.set()
        for pr in procs:
            pr.join()
        s.close()
        worst_probe = max(worst_probe, pm); worst_read = max(worst_read, dt); worst_p999 = max(worst_p999, probe_p999.value)
        print(f'round {rnd}: {a.kind} {cnt} elements in {dt*1000:.1f} ms, probe max {pm:.2f} ms (p99.9 {probe_p999.value:.2f})')
    print('slowlog max us by command:', slowest(a.port))
    if a.rss_pid:
        peak = status('VmHWM')
        print(f'RSS steady {steady / 2**20:.1f} MiB, peak during the rounds {peak / 2**20:.1f} MiB (+{(peak - steady) / 2**20:.1f} MiB)')
        if before_load is not None:
            size = steady - before_load
            print(f'collection: +{size / 2**20:.1f} MiB of RSS when loaded; peak over steady / collection = {(peak - steady) / max(size, 1):.2f}')
    print(f'MAX {a.kind}: read {worst_read*1000:.1f} ms, probe max {worst_probe:.2f} ms (p99.9 {worst_p999:.2f}) over {a.rounds} rounds')

main()
