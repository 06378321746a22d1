-- queue mode has consumed all 10,000 partitions but one (leased after the first call)
SELECT queen.pop('{"queue":"bench.wide","group":"__QUEUE_MODE__","batch":10,"partitions":1,"autoAck":false,"leaseId":"0190a000-0000-7000-8000-0000000b0002"}') IS NOT NULL;
