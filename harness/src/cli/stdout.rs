//! stdout that a reader who stops reading cannot crash. `chaos run | head -1`
//! closes the pipe early; `println!` would panic on the broken pipe (exit 101)
//! and a report written after the table would be lost (issue 15). Here the
//! first failed write closes stdout for the rest of the command, quietly for a
//! broken pipe (the reader chose to stop), with one warning for anything else
//! (a full disk behind `> file`); the command still ends with its own exit code.
//! stderr likewise never ends a command (`2>&1 | head -1` closes it too).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout, unless an earlier write failed.
pub(crate) fn print(text: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(error) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != io::ErrorKind::BrokenPipe {
            // stderr may be gone too; nothing is left to tell then.
            let _ = writeln!(
                io::stderr(),
                "warning: stdout could not be written ({error}); the rest of it is dropped"
            );
        }
    }
}

/// Writes `text` to stderr; a stderr that cannot be written (`2>&1 | head`)
/// is no reason to end the command, or to change its exit code.
pub(crate) fn print_err(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// `println!` over [`print`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::stdout::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` over [`print`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::stdout::print(&format!($($arg)*))
    };
}

/// `eprintln!` over [`print_err`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::stdout::print_err(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` over [`print_err`].
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli::stdout::print_err(&format!($($arg)*))
    };
}

pub(crate) use {err, errln, out, outln};
