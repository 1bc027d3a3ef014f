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
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
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

/// Where the command is, so that what a signal's message says is what
/// happens (issue 27: a SIGTERM after the last cell said "no report will be
/// written", then all four were written). The first to move it decides: a
/// signal while [`WORKING`] stops the work and nothing is written; once the
/// command [`begin_writing`]s, the work is whole and its reports are written.
static PHASE: AtomicU8 = AtomicU8::new(WORKING);
const WORKING: u8 = 0;
const STOPPED: u8 = 1;
const WRITING: u8 = 2;

/// The work is done, and its reports are to be written: a signal from now
/// on lets them be written. `false` when a signal stopped the work first:
/// then nothing may be written, as its message said.
pub(crate) fn begin_writing() -> bool {
    match PHASE.compare_exchange(WORKING, WRITING, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => true,
        Err(phase) => phase == WRITING,
    }
}

/// A signal came: `true` if it stopped the work, `false` if the reports
/// were already being written.
fn stop() -> bool {
    match PHASE.compare_exchange(WORKING, STOPPED, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => true,
        Err(phase) => phase == STOPPED,
    }
}

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
        if !stop() {
            errln!(
                "\n{name}: every trial has run; the reports are being written, then chaos exits with the run's own code ({again})"
            );
            continue;
        }
        errln!("\n{name}: {message} ({again})");
        if in_flight == InFlight::Abandon {
            std::thread::spawn(|| {
                std::thread::sleep(GRACE);
                quit_now();
            });
        }
    }
}

/// Live targets go first: no orphans; then no half-written file.
fn quit_now() -> ! {
    crate::live::end_all_targets();
    crate::fs::remove_partial_files();
    let signal = received().unwrap_or("signal");
    if PHASE.load(Ordering::SeqCst) == WRITING {
        errln!("interrupted ({signal}) while writing the reports: each report written is whole; the others were not written");
    } else {
        errln!("interrupted ({signal}): nothing was written");
    }
    std::process::exit(i32::from(Exit::Interrupted.code()));
}

#[cfg(test)]
mod tests {
    use super::*;

    // guards: a SIGTERM after the last cell said "no report will be
    // written", then wrote all four (issue 27)
    #[test]
    fn the_first_of_a_signal_and_the_writing_decides_what_happens() {
        PHASE.store(WORKING, Ordering::SeqCst);
        assert!(stop(), "a signal while working stops the work");
        assert!(!begin_writing(), "then nothing is written");
        PHASE.store(WORKING, Ordering::SeqCst);
        assert!(begin_writing());
        assert!(
            !stop(),
            "a signal while writing lets the reports be written"
        );
        assert!(begin_writing());
        PHASE.store(WORKING, Ordering::SeqCst);
    }
}
