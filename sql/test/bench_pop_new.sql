-- a fresh group each time: every partition is pending
SELECT queen.pop(jsonb_build_object('queue','bench.wide','group','gw' || :client_id || '-' || (random()*1e9)::bigint,'batch',1,'partitions',1,'autoAck',false,'leaseId',gen_random_uuid())) IS NOT NULL;
