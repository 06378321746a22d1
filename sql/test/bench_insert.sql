INSERT INTO qt.plain (id, transaction_id, partition_id, payload, created_at)
SELECT (x.c || '-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, x.c || '-' || g,
       ('00000000-0000-4000-8000-00000000000' || (g % 10))::uuid,
       '{"message":"hello world","n":12345,"ok":true}'::jsonb, clock_timestamp()
  FROM (SELECT lpad(to_hex(nextval('qt.bench_seq')), 8, '0') AS c) x, generate_series(1, 100) g;
