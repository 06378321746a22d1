#!/usr/bin/env python3
"""Conflated drain vs normal drain on one queue (200 partitions x 50 messages).

    python3 bench/conflation_drain.py [BROKER_URL]

Pushes 10,000 messages to queue `cb`, then drains it with three fresh groups
(conflated batch 10; normal batch 1 x 10 partitions; normal batch 100 x 10),
each pop followed by one /ack/batch; prints delivered, pops and ms per pop+ack."""
import json, time, urllib.request
import sys
B=sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6632"
def req(m, p, body=None):
    r=urllib.request.Request(B+p, method=m, data=json.dumps(body).encode() if body is not None else None, headers={"content-type":"application/json"})
    with urllib.request.urlopen(r) as f:
        d=f.read(); return f.status, (json.loads(d) if d else None)
# 200 partitions x 50 messages = 10,000
for b in range(20):
    items=[{"queue":"cb","partition":f"p{(b*500+i)%200}","payload":{"i":b*500+i}} for i in range(500)]
    req("POST","/api/v1/push",{"items":items})
def drain(group, extra):
    n=pops=0; t=time.time()
    while True:
        s,j=req("GET",f"/api/v1/pop/queue/cb?consumerGroup={group}{extra}")
        pops+=1
        if s==204 or not j["messages"]: break
        n+=len(j["messages"])
        acks=[{"transactionId":m["transactionId"],"partitionId":m["partitionId"],"leaseId":m["leaseId"],"status":"completed"} for m in j["messages"]]
        req("POST","/api/v1/ack/batch",{"acknowledgments":acks,"consumerGroup":group})
    return n,pops,time.time()-t
for g,e in [("conf","&conflation=true&batch=10"),("norm1","&batch=1&partitions=10"),("norm","&batch=100&partitions=10")]:
    n,p,dt=drain(g,e)
    print(f"{g:6s} {e:32s} delivered={n:6d} pops={p:5d} {dt:6.2f}s  {1000*dt/p:6.2f} ms/pop+ack")
