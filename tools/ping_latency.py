#!/usr/bin/env python3
"""Max and mean PING round trip over a period: python3 ping_latency.py PORT SECONDS."""
import socket,time,sys
p=int(sys.argv[1]); dur=float(sys.argv[2])
s=socket.create_connection(('127.0.0.1',p)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1)
end=time.time()+dur; mx=0; n=0; tot=0
while time.time()<end:
    t=time.perf_counter(); s.sendall(b'PING\r\n'); s.recv(64); d=(time.perf_counter()-t)*1000
    mx=max(mx,d); n+=1; tot+=d; time.sleep(0.01)
print(f"ping_max_ms {mx:.2f} avg_ms {tot/n:.3f} samples {n}")
