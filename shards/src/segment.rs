//! Append-only segment files: durable record logs written with glommio's
//! file I/O from the shard that owns them. Knows nothing of queues.
//!
//! # Format
//! A segment is a sequence of records, each
//! `len: u32 LE | crc32(bytes): u32 LE | bytes`, with `1 <= len <= MAX_RECORD`.
//! A zero length is invalid on purpose: a crash can leave zero-filled pages
//! at the tail, and those must not parse as (empty) records.
//!
//! # Durability and group commit
//! [`SegmentWriter::append`] resolves only after the bytes are written and
//! `fdatasync`'d. Appends that arrive while an earlier write+fsync is running
//! are gathered into the next write, so one fsync covers all of them. The
//! first appender of an idle writer runs the flush loop itself; the others
//! wait on a oneshot for the round that covered them.
//!
//! # Reading back
//! [`decode`] walks a segment's bytes: a bad record (short header, length
//! past the end, zero length, wrong checksum) that is the last thing in the
//! file is a *torn tail* (a crash mid-write; the caller truncates it away);
//! a bad record with more bytes after it is *corruption in the middle*.
//!
//! # Threads
//! A writer and everything it owns live on one glommio executor (`Rc`,
//! `RefCell`); reads also run on an executor (`read_segment`).

use futures_channel::oneshot;
use glommio::io::BufferedFile;
use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Bytes of a record header (length + checksum).
pub const HEADER: usize = 8;
/// Largest record accepted (64 MiB, the broker's largest request body):
/// a larger length field can only be damage.
pub const MAX_RECORD: usize = 64 << 20;

/// Appends one record (header + bytes) to `buf`.
pub fn encode(buf: &mut Vec<u8>, rec: &[u8]) {
    buf.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32(rec).to_le_bytes());
    buf.extend_from_slice(rec);
}

/// How a segment's bytes ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Every byte belongs to a valid record.
    Clean,
    /// The last record is damaged (crash mid-write); `valid_len` bytes are good.
    TornTail {
        /// Length of the valid prefix.
        valid_len: u64,
    },
    /// A damaged record with more bytes after it, at `offset`.
    Corrupt {
        /// Offset of the damaged record.
        offset: u64,
    },
}

/// A decoded segment.
#[derive(Debug)]
pub struct Decoded {
    /// The valid records, in append order (before the damage, if any).
    pub records: Vec<Vec<u8>>,
    /// How the bytes ended.
    pub ending: Ending,
}

/// Decodes a segment's bytes (see the module doc for torn vs corrupt).
pub fn decode(bytes: &[u8]) -> Decoded {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let bad_end = |records| Decoded {
            records,
            ending: Ending::TornTail {
                valid_len: at as u64,
            },
        };
        if rest.len() < HEADER {
            return bad_end(records);
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len == 0 || len > MAX_RECORD {
            // Zeroed or garbage header: torn if nothing but zeros follows.
            if rest.iter().all(|&b| b == 0) {
                return bad_end(records);
            }
            return Decoded {
                records,
                ending: Ending::Corrupt { offset: at as u64 },
            };
        }
        if rest.len() < HEADER + len {
            return bad_end(records);
        }
        let body = &rest[HEADER..HEADER + len];
        if crc32(body) != crc {
            if rest.len() == HEADER + len {
                return bad_end(records);
            }
            return Decoded {
                records,
                ending: Ending::Corrupt { offset: at as u64 },
            };
        }
        records.push(body.to_vec());
        at += HEADER + len;
    }
    Decoded {
        records,
        ending: Ending::Clean,
    }
}

/// Reads and decodes a whole segment file.
pub async fn read_segment(path: &Path) -> io::Result<Decoded> {
    let f = BufferedFile::open(path).await.map_err(io::Error::from)?;
    let size = f.file_size().await.map_err(io::Error::from)? as usize;
    let mut bytes = Vec::with_capacity(size);
    while bytes.len() < size {
        let chunk = f
            .read_at(bytes.len() as u64, size - bytes.len())
            .await
            .map_err(io::Error::from)?;
        if chunk.is_empty() {
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let _ = f.close().await;
    Ok(decode(&bytes))
}

/// Cuts a segment file down to `len` bytes and syncs it (after a torn tail).
pub async fn truncate_segment(path: &Path, len: u64) -> io::Result<()> {
    let f = glommio::io::OpenOptions::new()
        .read(true)
        .write(true)
        .buffered_open(path)
        .await
        .map_err(io::Error::from)?;
    f.truncate(len).await.map_err(io::Error::from)?;
    f.fdatasync().await.map_err(io::Error::from)?;
    f.close().await.map_err(io::Error::from)
}

/// Permissions of a new segment file: owner only (issue 17: spool files hold
/// the payloads of unencrypted queues in clear).
pub const SEGMENT_MODE: libc::mode_t = 0o600;

type Waiter = oneshot::Sender<Result<(), String>>;

/// Appends gathered for the next write.
#[derive(Debug, Default)]
struct Gathered {
    bytes: Vec<u8>,
    waiters: Vec<Waiter>,
}

/// An open segment being appended to (one executor).
#[derive(Debug)]
pub struct SegmentWriter {
    path: PathBuf,
    file: Rc<BufferedFile>,
    /// Bytes durable on disk.
    durable: Cell<u64>,
    /// Records appended (accepted, durable or not).
    records: Cell<u64>,
    /// Appends waiting for the next write.
    gathered: RefCell<Gathered>,
    /// Whether a flush loop is running.
    flushing: Cell<bool>,
    /// Set after a failed write or fsync: the file's tail is unknown, so the
    /// writer refuses further appends (the caller rotates).
    broken: RefCell<Option<String>>,
    /// Completed write+fsync rounds (counter; tests check group commit).
    pub rounds: Cell<u64>,
}

impl SegmentWriter {
    /// Creates a new, empty segment at `path` (truncating any file there),
    /// readable and writable by its owner only: a segment holds payloads.
    pub async fn create(path: &Path) -> io::Result<Rc<SegmentWriter>> {
        let file = glommio::io::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(SEGMENT_MODE)
            .buffered_open(path)
            .await
            .map_err(io::Error::from)?;
        Ok(Rc::new(SegmentWriter {
            path: path.to_path_buf(),
            file: Rc::new(file),
            durable: Cell::new(0),
            records: Cell::new(0),
            gathered: RefCell::new(Gathered::default()),
            flushing: Cell::new(false),
            broken: RefCell::new(None),
            rounds: Cell::new(0),
        }))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records appended so far (including those not yet durable).
    pub fn records(&self) -> u64 {
        self.records.get()
    }

    /// Bytes appended so far (durable plus gathered).
    pub fn bytes(&self) -> u64 {
        self.durable.get() + self.gathered.borrow().bytes.len() as u64
    }

    /// Why the writer refuses appends, if it does.
    pub fn broken(&self) -> Option<String> {
        self.broken.borrow().clone()
    }

    /// Whether a write is in progress or gathered bytes wait for one.
    pub fn busy(&self) -> bool {
        self.flushing.get() || !self.gathered.borrow().bytes.is_empty()
    }

    /// Appends `records` (in order) and resolves once they are on disk.
    /// The records are accepted synchronously, before the first await, so
    /// appends from one task keep their order.
    pub async fn append(self: &Rc<Self>, records: &[Vec<u8>]) -> Result<(), String> {
        if let Some(why) = self.broken() {
            return Err(why);
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut g = self.gathered.borrow_mut();
            for r in records {
                encode(&mut g.bytes, r);
            }
            g.waiters.push(tx);
        }
        self.records.set(self.records.get() + records.len() as u64);
        if !self.flushing.get() {
            self.flushing.set(true);
            let me = self.clone();
            glommio::spawn_local(async move { me.flush_loop().await }).detach();
        }
        rx.await
            .unwrap_or_else(|_| Err("segment writer dropped".into()))
    }

    /// Waits until nothing is gathered or being written.
    pub async fn settle(&self) {
        while self.busy() {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    async fn flush_loop(self: Rc<Self>) {
        loop {
            let round = std::mem::take(&mut *self.gathered.borrow_mut());
            if round.waiters.is_empty() {
                break;
            }
            let outcome = match self.broken() {
                Some(why) => Err(why),
                None => self.write_round(round.bytes).await,
            };
            if let Err(e) = &outcome {
                self.broken.borrow_mut().get_or_insert_with(|| e.clone());
            }
            self.rounds.set(self.rounds.get() + 1);
            for w in round.waiters {
                let _ = w.send(outcome.clone());
            }
        }
        self.flushing.set(false);
    }

    async fn write_round(&self, bytes: Vec<u8>) -> Result<(), String> {
        let len = bytes.len() as u64;
        let at = self.durable.get();
        let n = self
            .file
            .write_at(bytes, at)
            .await
            .map_err(|e| format!("write {}: {e}", self.path.display()))?;
        if n as u64 != len {
            return Err(format!(
                "short write to {} ({n} of {len} bytes)",
                self.path.display()
            ));
        }
        self.file
            .fdatasync()
            .await
            .map_err(|e| format!("fdatasync {}: {e}", self.path.display()))?;
        self.durable.set(at + len);
        Ok(())
    }
}

/// CRC-32 (IEEE, reflected, as zlib) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = crc_table();
    let mut c = !0u32;
    for &b in data {
        c = TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
