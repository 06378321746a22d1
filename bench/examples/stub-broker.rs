//! The test stub as a process: `PORT=6632 stub-broker` serves the stand-in
//! broker of `tests/stub/mod.rs` on 127.0.0.1:$PORT. For checking `run.sh`
//! end to end without the real broker:
//! `BROKER_BIN=/tmp/target-bench/release/examples/stub-broker bench/run.sh --quick`.

#[path = "../tests/stub/mod.rs"]
mod stub;

use std::net::TcpListener;

fn main() {
    let port = std::env::var("PORT").unwrap_or_else(|_| "6632".into());
    let l = TcpListener::bind(format!("127.0.0.1:{port}")).expect("bind 127.0.0.1:$PORT");
    stub::serve_on(l);
    loop {
        std::thread::park();
    }
}
