//! A bounded property test of the HTTP/1.1 request decoder (issue 6, item
//! 7): random and mutated inputs, fed in random-sized pieces, must never
//! panic, never loop (every `decode` call either makes progress or asks for
//! more bytes), never hold more than a bounded buffer, and never yield a
//! body over the limit. Plus the request-smuggling cases, each a 400.
//!
//! The generator is a hand-rolled xorshift so runs are reproducible: set
//! `CODEC_FUZZ_SEED` to replay one, `CODEC_FUZZ_CASES` to run longer by hand.

use shards::http::{Decoded, Decoder, HttpError, Limits};

/// Cases per run in CI (under a second in release).
const DEFAULT_CASES: u64 = 200_000;

/// Reproducible PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

const LIMITS: Limits = Limits {
    max_header_bytes: 2048,
    max_body_bytes: 4096,
};

const SEEDS: &[&[u8]] = &[
    b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /api/v1/push HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n{\"items\":[]}",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: x\r\n\r\n",
    b"GET /a?b=%20 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
];

const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b"\t",
    b"\0",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked, identity\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 99999999999999999999\r\n",
    b"ffffffff\r\n",
    b"0\r\n\r\n",
    b"%",
    b"%zz",
    b"HTTP/1.1",
    b"GET ",
    b"POST ",
    b"\xff\xfe",
];

/// One mutated input.
fn mutate(rng: &mut Rng) -> Vec<u8> {
    let mut v: Vec<u8> = if rng.below(8) == 0 {
        (0..rng.below(300)).map(|_| rng.next() as u8).collect()
    } else {
        rng.pick(SEEDS).to_vec()
    };
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if at < v.len() => {
                let n = rng.below(v.len() - at + 1).min(16);
                v.drain(at..at + n);
            }
            2 => {
                let t = rng.pick(TOKENS);
                v.splice(at..at, t.iter().copied());
            }
            3 => {
                let b = rng.next() as u8;
                let n = rng.below(64);
                v.splice(at..at, std::iter::repeat_n(b, n));
            }
            _ => {
                // Append another seed: pipelining and leftovers.
                let s: &&[u8] = rng.pick(SEEDS);
                v.extend_from_slice(s);
            }
        }
    }
    v
}

/// Feeds `input` in random pieces; checks the invariants; returns the
/// first error, if any.
fn drive(rng: &mut Rng, input: &[u8]) -> Option<HttpError> {
    let mut dec = Decoder::new(LIMITS);
    let mut buf = Vec::new();
    let mut at = 0;
    // Each call either consumes input or asks for more, so this bounds a hang.
    let mut budget = 4 * input.len() + 16;
    loop {
        if at < input.len() {
            let n = 1 + rng.below(64);
            let end = (at + n).min(input.len());
            buf.extend_from_slice(&input[at..end]);
            at = end;
        }
        loop {
            budget = budget
                .checked_sub(1)
                .expect("decoder loops without progress");
            let before = buf.len();
            match dec.decode(&mut buf) {
                Ok(Decoded::Incomplete) => break,
                Ok(Decoded::Continue) => {}
                Ok(Decoded::Request { req, .. }) => {
                    assert!(
                        req.body.len() <= LIMITS.max_body_bytes,
                        "body over the limit"
                    );
                    assert!(req.headers.len() <= shards::http::MAX_HEADERS);
                }
                Err(e) => {
                    assert!(matches!(e.status(), 400 | 408 | 413 | 431), "{e:?}");
                    return Some(e);
                }
            }
            assert!(buf.len() <= before, "decode grew the buffer");
        }
        // Bounded memory: what waits unparsed is at most a head, a body
        // and one feed, whatever the input's length.
        assert!(
            buf.len() <= 2 * (LIMITS.max_header_bytes + LIMITS.max_body_bytes) + 128,
            "decoder keeps {} bytes buffered",
            buf.len()
        );
        if at >= input.len() {
            return None;
        }
    }
}

#[test]
fn random_and_mutated_requests_never_panic_hang_or_overallocate() {
    let seed: u64 = std::env::var("CODEC_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_CAFE_F00D_0001);
    let cases: u64 = std::env::var("CODEC_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let mut rng = Rng(seed);
    let (mut ok, mut refused) = (0u64, 0u64);
    for case in 0..cases {
        let input = mutate(&mut rng);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut r2 = Rng(rng.0 ^ case.wrapping_add(1));
            drive(&mut r2, &input)
        }));
        match r {
            Ok(None) => ok += 1,
            Ok(Some(_)) => refused += 1,
            Err(_) => panic!(
                "case {case} (seed {seed}) panicked on {:?}",
                String::from_utf8_lossy(&input)
            ),
        }
    }
    // The generator must exercise both sides, or it tests nothing.
    assert!(
        ok > cases / 50 && refused > cases / 50,
        "ok {ok} refused {refused}"
    );
}

fn first_error(input: &[u8]) -> Option<HttpError> {
    let mut dec = Decoder::new(LIMITS);
    let mut buf = input.to_vec();
    for _ in 0..64 {
        match dec.decode(&mut buf) {
            Ok(Decoded::Incomplete) => return None,
            Ok(_) => {}
            Err(e) => return Some(e),
        }
    }
    None
}

#[test]
fn request_smuggling_attempts_are_400() {
    let cases: &[&[u8]] = &[
        // CL + TE, in either order.
        b"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
        // Conflicting or malformed Content-Length.
        b"POST / HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"POST / HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nContent-Length: +4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nContent-Length: 0x4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length : 4\r\n\r\nabcd",
        // Obfuscated or stacked Transfer-Encoding.
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        // Bad chunk sizes.
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 0\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    ];
    for c in cases {
        let e =
            first_error(c).unwrap_or_else(|| panic!("accepted: {:?}", String::from_utf8_lossy(c)));
        // A chunk size past the body limit may be refused as 413 first.
        let allowed: &[u16] = if c.windows(5).any(|w| w == b"10000") {
            &[400, 413]
        } else {
            &[400]
        };
        assert!(
            allowed.contains(&e.status()),
            "{:?}: {e:?}",
            String::from_utf8_lossy(c)
        );
    }
}
