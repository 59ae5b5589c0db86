//! The sandbox's end of the network proxy: a listening socket on loopback inside the
//! sandbox's private network namespace, handed to cordon (which accepts on it and dials out
//! from the host's namespace). No process of cordon's runs inside, nothing joins the
//! namespace from outside: the connections simply arrive on a socket cordon holds.

use std::io::IoSlice;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::BorrowedFd;

use cordon_types::CHILD_NETWORK_FD;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
    bind, listen, sendmsg, socket_with,
};

use crate::error::Setup;
use crate::sys;

/// Connections the program may have waiting before cordon accepts them.
const BACKLOG: i32 = 128;

/// Makes the listening socket on `127.0.0.1:port` and sends it to cordon over
/// [`CHILD_NETWORK_FD`]; then closes both here, so that the program inherits neither.
pub fn hand_over(port: u16) -> Setup<()> {
    let result = listen_and_send(port);
    sys::close(CHILD_NETWORK_FD);
    result
}

fn listen_and_send(port: u16) -> Setup<()> {
    let listener = socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("create the proxy's socket: {e}"))?;
    bind(&listener, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("bind the proxy's socket to 127.0.0.1:{port}: {e}"))?;
    listen(&listener, BACKLOG).map_err(|e| format!("listen on 127.0.0.1:{port}: {e}"))?;
    // SAFETY: cordon's executor placed the network socket at this number (inherited, open
    // until `hand_over` closes it after this borrow ends).
    let channel = unsafe { BorrowedFd::borrow_raw(CHILD_NETWORK_FD) };
    let fds = [std::os::fd::AsFd::as_fd(&listener)];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err("the proxy's socket does not fit its message".into());
    }
    sendmsg(
        channel,
        &[IoSlice::new(b"L")],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(|e| format!("hand the proxy's socket to cordon: {e}"))?;
    Ok(())
}
