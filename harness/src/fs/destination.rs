//! Where a report goes, decided by what is at its path before anything is
//! written (issue 27): a temporary file renamed over the path is right for a
//! regular file, and wrong for anything else, which it silently replaces (a
//! FIFO's reader got nothing, `/dev/stdout` became a file). So a regular
//! file or a new path is replaced atomically, `-` and any name of chaos's own
//! stdout or stderr (`/dev/stdout`) are written to that stream, a FIFO is
//! written through, and everything else is refused with what to do instead:
//! a symbolic link (chaos never writes through one), a device, a socket.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The temporary files being written now: a second signal exits at once,
/// from another thread, and must leave none of them behind (issue 27).
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn partial() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PARTIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes every temporary file being written: for an exit that cannot wait
/// for the writer. The reports already renamed into place are whole.
pub(crate) fn remove_partial_files() {
    for temporary in std::mem::take(&mut *partial()) {
        let _ = std::fs::remove_file(temporary);
    }
}

/// What is at a report's path, and so how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Destination {
    /// A regular file, or nothing yet: written beside it and renamed over it.
    File,
    /// `-`, or a name of chaos's own stdout (`/dev/stdout`, `/proc/self/fd/1`).
    Stdout,
    /// A name of chaos's own stderr.
    Stderr,
    /// A FIFO: opened for writing (which waits for its reader) and written through.
    Fifo,
}

impl Destination {
    /// Reads what is at `path`; the error says why chaos will not write there
    /// and what to name instead.
    pub(crate) fn of(path: &Path) -> io::Result<Destination> {
        if path.as_os_str() == "-" {
            return Ok(Destination::Stdout);
        }
        let found = match std::fs::symlink_metadata(path) {
            Ok(found) => found,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Destination::File),
            Err(error) => return Err(error),
        };
        let kind = found.file_type();
        if kind.is_file() {
            return Ok(Destination::File);
        }
        if kind.is_dir() {
            return Err(io::Error::other("it is a folder, not a file"));
        }
        // `/dev/stdout` is a link to the stream chaos already holds.
        if let Ok(target) = std::fs::metadata(path) {
            if same_file(&target, stream_metadata(io::stdout().as_fd())) {
                return Ok(Destination::Stdout);
            }
            if same_file(&target, stream_metadata(io::stderr().as_fd())) {
                return Ok(Destination::Stderr);
            }
        }
        if kind.is_symlink() {
            let points_to = std::fs::read_link(path)
                .map(|to| format!(" (to {})", to.display()))
                .unwrap_or_default();
            return Err(io::Error::other(format!(
                "it is a symbolic link{points_to}, and chaos never writes through one; \
                 name the file itself, or `-` for stdout"
            )));
        }
        if kind.is_fifo() {
            return Ok(Destination::Fifo);
        }
        let what = if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        Err(io::Error::other(format!(
            "it is {what}; chaos writes reports to a regular file (replaced whole), a FIFO, or `-` for stdout"
        )))
    }
}

/// Writes `bytes` to `path` as [`Destination::of`] says; creates the parent
/// folder of a new file. A regular file appears whole or not at all, and no
/// temporary file is left behind when writing fails.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match Destination::of(path)? {
        Destination::File => replace_atomically(path, bytes),
        Destination::Stdout => write_stream(io::stdout().lock(), bytes),
        Destination::Stderr => write_stream(io::stderr().lock(), bytes),
        Destination::Fifo => {
            // No create, no truncate, no link followed: only the FIFO just seen.
            let fifo = OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(path)?;
            write_stream(fifo, bytes)
        }
    }
}

fn write_stream(mut stream: impl Write, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes)?;
    stream.flush()
}

/// Writes beside `path` and renames over it. The temporary name is this
/// process's own and created fresh, so it never follows a link planted there.
fn replace_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)?;
    }
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let temporary = path.with_file_name(format!(".{file_name}.{}.partial", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    partial().push(temporary.clone());
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|file| write_file(file, bytes))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    partial().retain(|other| *other != temporary);
    written
}

fn write_file(mut file: File, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    file.sync_data()
}

fn stream_metadata(fd: std::os::fd::BorrowedFd<'_>) -> Option<Metadata> {
    let owned = fd.try_clone_to_owned().ok()?;
    File::from(owned).metadata().ok()
}

fn same_file(found: &Metadata, stream: Option<Metadata>) -> bool {
    stream.is_some_and(|stream| stream.dev() == found.dev() && stream.ino() == found.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_path_is_written_or_refused_as_documented() {
        let root = std::env::temp_dir().join(format!("chaos-destination-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();

        let file = root.join("deeper/junit.xml");
        assert_eq!(Destination::of(&file).unwrap(), Destination::File);
        write(&file, b"one").unwrap();
        write(&file, b"two").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(root.join("deeper")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");

        assert_eq!(
            Destination::of(Path::new("-")).unwrap(),
            Destination::Stdout
        );
        let device = Destination::of(Path::new("/dev/null")).unwrap_err();
        assert!(device.to_string().contains("it is a device"), "{device}");
        let folder = Destination::of(&root).unwrap_err();
        assert!(folder.to_string().contains("folder"), "{folder}");

        let link = root.join("link.xml");
        std::os::unix::fs::symlink(root.join("elsewhere.xml"), &link).unwrap();
        let refused = write(&link, b"x").unwrap_err();
        assert!(refused.to_string().contains("symbolic link"), "{refused}");
        assert!(
            !root.join("elsewhere.xml").exists(),
            "nothing was written through"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    // guards: a double SIGTERM left a hidden `.report.json.partial` (issue 27)
    #[test]
    fn an_exit_while_writing_leaves_no_partial_file() {
        let root = std::env::temp_dir().join(format!("chaos-partial-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let temporary = root.join(".report.json.1.partial");
        std::fs::write(&temporary, b"half").unwrap();
        partial().push(temporary.clone());
        remove_partial_files();
        assert!(!temporary.exists());
        assert!(partial().is_empty());
        write(&root.join("report.json"), b"whole").unwrap();
        assert!(
            partial().is_empty(),
            "a finished write is no longer partial"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
