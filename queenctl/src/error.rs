//! The one error type of `queenctl`. Each variant prints as one line after
//! `queenctl: ` and maps to an exit code; nothing in the binary panics on bad input
//! or a broker failure.

use std::fmt;

/// Every way a command can fail.
#[derive(Debug)]
pub enum Error {
    /// The broker could not be reached (connect, DNS, TLS, timeout, reset).
    Unreachable {
        /// The base URL tried.
        url: String,
        /// What went wrong, lower case (`connection refused`).
        reason: String,
    },
    /// The broker answered with a status outside 2xx.
    Http {
        /// The status code.
        status: u16,
        /// The body on one line (the broker's JSON error, compacted).
        body: String,
    },
    /// A payload given on the command line or on stdin is not JSON.
    BadPayload {
        /// The stdin line number, when it came from stdin.
        line: Option<usize>,
        /// serde_json's message (`expected value at line 1 column 2`).
        detail: String,
    },
    /// A 2xx answer that does not have the shape the spec gives.
    BadAnswer {
        /// The request, e.g. `GET /api/v1/status/queues`.
        what: String,
        /// What was missing or malformed.
        detail: String,
    },
    /// The arguments make no sense together (beyond what clap checks).
    Usage(String),
    /// Reading stdin or writing stdout failed.
    Io(std::io::Error),
    /// A batch of `push` had items the broker answered `failed`.
    PushFailed {
        /// Items stored (queued, duplicate or buffered) before and besides the failures.
        pushed: u64,
        /// Items answered `failed`.
        failed: u64,
        /// The first failure's error text.
        first: String,
    },
}

impl Error {
    /// The process exit code: 2 for usage errors (as clap uses), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unreachable { url, reason } => write!(f, "cannot reach {url}: {reason}"),
            Error::Http { status, body } if body.is_empty() => write!(f, "HTTP {status}"),
            Error::Http { status, body } => write!(f, "HTTP {status}: {body}"),
            Error::BadPayload { line: None, detail } => write!(f, "payload is not JSON: {detail}"),
            Error::BadPayload {
                line: Some(n),
                detail,
            } => write!(f, "stdin line {n}: payload is not JSON: {detail}"),
            Error::BadAnswer { what, detail } => {
                write!(f, "unexpected answer to {what}: {detail}")
            }
            Error::Usage(s) => f.write_str(s),
            Error::Io(e) => write!(f, "{e}"),
            Error::PushFailed {
                pushed,
                failed,
                first,
            } => write!(f, "pushed {pushed}, {failed} failed: {first}"),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

/// A command's result.
pub type Result<T> = std::result::Result<T, Error>;
