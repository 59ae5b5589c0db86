//! A pseudo-terminal cordon owns, for interactive programs ([`crate::StdinMode::Terminal`]).
//!
//! The program's standard input, output and error are the terminal's secondary side; cordon
//! holds the primary side: it reads what the program writes (one stream, delivered as
//! stdout) and forwards its own input into it. The user's terminal is never the program's:
//! `TIOCSTI` or `TIOCLINUX` on its descriptors reach only this terminal, whose input only the
//! program itself reads.

use std::os::fd::{AsFd, OwnedFd};

use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};

/// Both sides of a new pseudo-terminal.
pub(crate) struct Pty {
    /// cordon's side (read: the program's output; write: its input).
    pub(crate) primary: OwnedFd,
    /// The program's side.
    pub(crate) secondary: OwnedFd,
}

impl Pty {
    /// Opens a pseudo-terminal; its size is that of cordon's own terminal when there is one.
    /// The secondary side is opened through the primary (`TIOCGPTPEER`), never by path.
    pub(crate) fn open() -> std::io::Result<Pty> {
        let primary = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&primary)?;
        unlockpt(&primary)?;
        let secondary = ioctl_tiocgptpeer(
            &primary,
            OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
        )?;
        let size = [std::io::stdout().as_fd(), std::io::stdin().as_fd()]
            .into_iter()
            .find_map(|fd| rustix::termios::tcgetwinsize(fd).ok());
        if let Some(size) = size {
            let _ = rustix::termios::tcsetwinsize(&secondary, size);
        }
        Ok(Pty { primary, secondary })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_secondary_writes_the_primary_reads() {
        let pty = Pty::open().unwrap();
        assert!(rustix::termios::isatty(&pty.secondary));
        rustix::io::write(&pty.secondary, b"hi\n").unwrap();
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&pty.primary, &mut buf).unwrap();
        // The line discipline turns "\n" into "\r\n".
        assert_eq!(&buf[..n], b"hi\r\n");
    }
}
