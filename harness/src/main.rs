//! The `chaos` command: a thin layer over the library. It parses the flags,
//! runs the command, and is the one place errors are printed.

use std::process::ExitCode;

use clap::Parser;

use chaos::cli::{self, Cli};
use chaos::{Error, Exit};

// A simulation allocates and frees thousands of small buffers (segments,
// headers, JSON); mimalloc measurably shortens that path (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let exit = match cli::run(Cli::parse()) {
        Ok(exit) => exit,
        Err(error) => report(&error),
    };
    exit.into()
}

/// Prints what stopped the command, and returns the exit code it carries.
/// A stderr that cannot be written changes nothing: the exit code says it.
fn report(error: &Error) -> Exit {
    use std::io::Write;
    let _ = match error {
        Error::Interrupted(_) => writeln!(std::io::stderr(), "{error}"),
        _ => writeln!(std::io::stderr(), "error: {error}"),
    };
    error.exit()
}
