//! Stopping on a signal. SIGINT (Ctrl-C), SIGTERM (what a CI runner sends at
//! its timeout, once) and SIGHUP all set the command's cancel flag; the
//! message names the signal, since "Ctrl-C again" means nothing to a runner.
//! Work in flight checks the flag (simulated trials between steps, live waits
//! every few milliseconds); for what cannot look (planning or judging a huge
//! trial) a backstop ends every live target and exits 130 shortly after, so
//! a signal always stops the command within about a second (issue 15). A
//! second signal exits at once.
//!
//! Own handlers rather than a crate's: the crate the project used could not
//! say which signal came.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use super::stdout::errln;
use crate::exit::Exit;

/// The writing end of the pipe the handler wakes the watcher through; -1
/// before one is installed.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// The first signal received, 0 for none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// How long after the first signal work in flight has to notice it, before
/// the backstop exits for it.
pub(crate) const GRACE: Duration = Duration::from_millis(800);

/// Only async-signal-safe calls here: a store and a `write(2)`.
extern "C" fn on_signal(signal: nix::libc::c_int) {
    let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: the fd is the pipe's writing end, kept open for the
        // process's life once stored.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = nix::unistd::write(fd, &[signal as u8]);
    }
}

/// The signal that stopped the command, as a user names it: `SIGTERM`.
pub(crate) fn received() -> Option<&'static str> {
    Signal::try_from(RECEIVED.load(Ordering::SeqCst))
        .ok()
        .map(Signal::as_str)
}

/// What to do with work in flight when a signal comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InFlight {
    /// Nothing of it is kept: after [`GRACE`], end the live targets and exit 130.
    Abandon,
    /// It writes what it has (a failure being shrunk): wait for it, until a
    /// second signal.
    Finish,
}

/// Sets the returned flag on SIGINT, SIGTERM or SIGHUP, saying `message`
/// with the signal's name; a second one ends every live target and exits 130.
pub(crate) fn cancel_on_signal(message: &'static str, in_flight: InFlight) -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    if let Err(error) = install(cancel.clone(), message, in_flight) {
        errln!("warning: a signal will not stop the run cleanly: {error}");
    }
    cancel
}

fn install(
    cancel: Arc<AtomicBool>,
    message: &'static str,
    in_flight: InFlight,
) -> std::io::Result<()> {
    let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe()?;
    // Leaked on purpose: the handler may write to it until the process ends.
    let write_fd = write.as_raw_fd();
    std::mem::forget(write);
    WAKE.store(write_fd, Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in SIGNALS {
        // SAFETY: the handler only makes async-signal-safe calls.
        unsafe { sigaction(signal, &action) }?;
    }
    std::thread::Builder::new()
        .name("chaos-signals".into())
        .spawn(move || watch(File::from(read), &cancel, message, in_flight))?;
    Ok(())
}

fn watch(mut wake: File, cancel: &AtomicBool, message: &str, in_flight: InFlight) {
    let mut byte = [0u8; 1];
    let mut first = true;
    while wake.read_exact(&mut byte).is_ok() {
        let name = Signal::try_from(i32::from(byte[0]))
            .map(Signal::as_str)
            .unwrap_or("a signal");
        if !first || cancel.swap(true, Ordering::SeqCst) {
            quit_now();
        }
        first = false;
        let again = if name == "SIGINT" {
            "Ctrl-C again to quit now".to_owned()
        } else {
            format!("{name} again to quit now")
        };
        errln!("\n{name}: {message} ({again})");
        if in_flight == InFlight::Abandon {
            std::thread::spawn(|| {
                std::thread::sleep(GRACE);
                quit_now();
            });
        }
    }
}

/// Live targets go first: no orphans.
fn quit_now() -> ! {
    crate::live::end_all_targets();
    errln!(
        "interrupted ({}): nothing was written",
        received().unwrap_or("signal")
    );
    std::process::exit(i32::from(Exit::Interrupted.code()));
}
