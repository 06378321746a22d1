//! Unit tests of the segment format, group commit and reading back.

use super::*;
use glommio::LocalExecutorBuilder;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "seg-test-{}-{}-{name}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir.join("seg.log")
}

/// Runs `f` on a fresh executor and returns its output.
fn on_executor<T, F, Fut>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
{
    LocalExecutorBuilder::default()
        .io_memory(256 << 10)
        .spawn(f)
        .expect("spawn executor")
        .join()
        .expect("executor ran")
}

fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("record-{i}").into_bytes()).collect()
}

#[test]
fn crc32_matches_the_zlib_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn decode_round_trips_clean_bytes() {
    let mut buf = Vec::new();
    for r in records(5) {
        encode(&mut buf, &r);
    }
    let d = decode(&buf);
    assert_eq!(d.records, records(5));
    assert_eq!(d.ending, Ending::Clean);
}

#[test]
fn a_partial_last_record_is_a_torn_tail() {
    let mut buf = Vec::new();
    for r in records(3) {
        encode(&mut buf, &r);
    }
    let good = buf.len();
    encode(&mut buf, b"the last one");
    buf.truncate(buf.len() - 4);
    let d = decode(&buf);
    assert_eq!(d.records, records(3));
    assert_eq!(
        d.ending,
        Ending::TornTail {
            valid_len: good as u64
        }
    );
    // A header cut short and a zero-filled tail are torn too.
    let mut short = buf[..good].to_vec();
    short.extend_from_slice(&[7, 0, 0]);
    assert!(matches!(decode(&short).ending, Ending::TornTail { .. }));
    let mut zeros = buf[..good].to_vec();
    zeros.extend_from_slice(&[0; 4096]);
    assert!(matches!(decode(&zeros).ending, Ending::TornTail { .. }));
}

#[test]
fn a_bad_checksum_followed_by_records_is_corruption() {
    let mut buf = Vec::new();
    encode(&mut buf, b"first");
    let second_at = buf.len();
    encode(&mut buf, b"second");
    encode(&mut buf, b"third");
    buf[second_at + HEADER] ^= 0xff;
    let d = decode(&buf);
    assert_eq!(d.records, vec![b"first".to_vec()]);
    assert_eq!(
        d.ending,
        Ending::Corrupt {
            offset: second_at as u64
        }
    );
    // The same damage on the last record is a torn tail.
    let mut last = Vec::new();
    encode(&mut last, b"first");
    encode(&mut last, b"second");
    let n = last.len();
    last[n - 1] ^= 0xff;
    assert!(matches!(decode(&last).ending, Ending::TornTail { .. }));
}

#[test]
fn appends_are_durable_and_read_back_in_order() {
    let path = tmp("order");
    let p = path.clone();
    let (decoded, rounds) = on_executor(move || async move {
        let w = SegmentWriter::create(&p).await.expect("create");
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let w = w.clone();
                glommio::spawn_local(async move { w.append(&[format!("r{i}").into_bytes()]).await })
            })
            .collect();
        for t in tasks {
            t.await.expect("append");
        }
        let rounds = w.rounds.get();
        let d = read_segment(&p).await.expect("read");
        (d.records, rounds)
    });
    let want: Vec<Vec<u8>> = (0..50).map(|i| format!("r{i}").into_bytes()).collect();
    assert_eq!(decoded, want);
    // Group commit: 50 concurrent appends need far fewer than 50 fsyncs.
    assert!(rounds < 50, "{rounds} rounds for 50 appends");
    let _ = std::fs::remove_dir_all(path.parent().expect("temp dir"));
}

#[test]
fn a_torn_file_is_truncated_to_its_valid_prefix() {
    let path = tmp("torn");
    let mut buf = Vec::new();
    for r in records(4) {
        encode(&mut buf, &r);
    }
    let good = buf.len() as u64;
    buf.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&path, &buf).expect("write");
    let p = path.clone();
    let (before, after) = on_executor(move || async move {
        let d = read_segment(&p).await.expect("read");
        if let Ending::TornTail { valid_len } = d.ending {
            truncate_segment(&p, valid_len).await.expect("truncate");
        }
        let again = read_segment(&p).await.expect("read again");
        (d, again)
    });
    assert_eq!(before.ending, Ending::TornTail { valid_len: good });
    assert_eq!(after.ending, Ending::Clean);
    assert_eq!(after.records, records(4));
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), good);
    let _ = std::fs::remove_dir_all(path.parent().expect("temp dir"));
}
