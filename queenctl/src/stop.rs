//! Ctrl-C as a flag. `tail` and `push --stdin` install the handler and check
//! [`requested`] between requests, so an interrupt ends them at a clean point: the
//! messages already printed are acked, the lines already read are pushed, and the
//! count is printed. A second Ctrl-C exits at once with 130, for a broker that hangs.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the handler thread on the first Ctrl-C; read by the main thread.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler. Failing to install it (another handler exists) only means
/// Ctrl-C keeps its default effect, so the error is ignored.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
}

/// True once Ctrl-C was pressed.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
