SELECT queen.push_batch(replace((SELECT v #>> '{}' FROM qt.kv WHERE k = 'tpl:' || :n), 'AAAAAAAA', lpad(to_hex(nextval('qt.bench_seq')), 8, '0'))::jsonb) IS NOT NULL;
