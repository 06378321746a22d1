//! UUIDs: the canonical-form check every parser uses ([`is_uuid`]), and
//! UUIDv7 minting (semantics.md §1): 48-bit Unix milliseconds, a 12-bit
//! counter for ids minted in the same millisecond, 62 random bits. One
//! process-wide atomic keeps ids strictly increasing across every shard,
//! which the push path relies on: all messages of one partition in one
//! transaction share a `created_at` and are ordered by id alone.
//!
//! Cost: one compare-and-swap on a shared cache line per id. When more than
//! 4096 ids are minted in one millisecond the counter carries into the
//! millisecond field, so ids run slightly ahead of the clock but stay ordered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `(unix_ms << 12) | counter` of the last id minted by this process.
/// Process-wide, not a shard's: ids must increase across every shard.
static LAST: AtomicU64 = AtomicU64::new(0);

/// Whether `s` is a UUID in canonical form (36 characters, hyphenated).
pub fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// Mints the next UUIDv7 of this process as its canonical string.
pub fn uuid_v7() -> String {
    mint_v7().hyphenated().to_string()
}

/// Mints the next UUIDv7 of this process.
pub fn mint_v7() -> uuid::Uuid {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut cur = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        let next = if now_ms > cur >> 12 {
            now_ms << 12
        } else {
            cur + 1
        };
        match LAST.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => cur = seen,
        }
    };
    let ms = stamp >> 12;
    let counter = stamp & 0xfff;
    let rand: u64 = rand::random();
    let hi: u64 = (ms << 16) | (0x7 << 12) | counter;
    let lo: u64 = (0b10 << 62) | (rand >> 2);
    uuid::Uuid::from_u64_pair(hi, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_check() {
        assert!(is_uuid("0191e0f2-0000-7000-8000-000000000000"));
        assert!(!is_uuid("nope"));
    }

    #[test]
    fn ids_strictly_increase_and_are_v7() {
        let mut prev = uuid_v7();
        for _ in 0..20_000 {
            let next = uuid_v7();
            assert!(next > prev, "{next} <= {prev}");
            let u = uuid::Uuid::parse_str(&next).unwrap();
            assert_eq!(u.get_version_num(), 7);
            prev = next;
        }
    }

    #[test]
    fn ids_increase_across_threads() {
        let handles: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..5000).map(|_| uuid_v7()).collect::<Vec<_>>()))
            .collect();
        let mut all: Vec<String> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "duplicate ids across threads");
    }
}
