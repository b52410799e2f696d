//! How the host proxy comes to listen on `127.0.0.1:PROXY_PORT` inside a
//! container that has no network: the host binds a unix socket in a folder
//! mounted into the container; `ah` itself, mounted read-only into the
//! container, runs there once (`ah __egress-listen`), binds the TCP port in
//! the container's own network namespace, and passes that listening socket
//! to the host over the unix socket (`SCM_RIGHTS`), then exits. The host
//! accepts on it from then on.
//!
//! No process stays in the container, so the `kill -KILL -1` that ends each
//! step cannot take the proxy down; only a container restart (a new network
//! namespace) needs a new handoff, which the backend makes before the next
//! command.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketType,
};

/// The first argument that makes `ah` run [`hand_over`] (see
/// `cli::network`).
pub const LISTEN_COMMAND: &str = "__egress-listen";

/// The port the proxy listens on inside the container. Its network
/// namespace is its own, so any fixed port is free.
pub const PROXY_PORT: u16 = 3128;

/// Inside the container: binds `127.0.0.1:port` and sends the listening
/// socket to the host's unix socket at `socket`.
pub fn hand_over(socket: &Path, port: u16) -> io::Result<()> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    let stream = UnixStream::connect(socket)?;
    send_fd(&stream, listener.as_fd())
}

/// On the host: waits up to `limit` for one connection on `listener` and
/// takes the listening TCP socket it carries. Anything else (no socket, a
/// socket that is not a listening IPv4 TCP one) is refused.
pub fn receive(listener: &UnixListener, limit: Duration) -> io::Result<TcpListener> {
    listener.set_nonblocking(false)?;
    let (stream, _) = accept_within(listener, limit)?;
    stream.set_read_timeout(Some(limit))?;
    let fd = recv_fd(&stream)?;
    check_listening_tcp(&fd)?;
    Ok(TcpListener::from(fd))
}

/// `accept` with a deadline (the helper may fail before connecting).
fn accept_within(
    listener: &UnixListener,
    limit: Duration,
) -> io::Result<(UnixStream, std::os::unix::net::SocketAddr)> {
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    // Past `Timespec`'s range is as good as for ever.
    let limit = Timespec::try_from(limit).ok();
    match rustix::event::poll(&mut fds, limit.as_ref())? {
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the sandbox did not hand over the proxy socket in time",
        )),
        _ => listener.accept(),
    }
}

/// Sends `fd` over `stream` with one byte of data (`SCM_RIGHTS`).
fn send_fd(stream: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the control message"));
    }
    rustix::net::sendmsg(
        stream,
        &[IoSlice::new(&[0])],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives one descriptor sent by [`send_fd`], close-on-exec. Any other
/// descriptor that came with it is closed.
fn recv_fd(stream: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    control
        .drain()
        .find_map(|message| match message {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
        .ok_or_else(|| io::Error::other("the sandbox sent no socket"))
}

/// Refuses a descriptor that is not a listening IPv4 TCP socket.
fn check_listening_tcp(fd: &OwnedFd) -> io::Result<()> {
    use rustix::net::sockopt::{socket_acceptconn, socket_domain, socket_type};
    // A descriptor that is no socket at all fails each of these.
    if socket_acceptconn(fd).is_ok_and(|listening| listening)
        && socket_domain(fd).is_ok_and(|domain| domain == AddressFamily::INET)
        && socket_type(fd).is_ok_and(|kind| kind == SocketType::STREAM)
    {
        Ok(())
    } else {
        Err(io::Error::other(
            "the sandbox sent a descriptor that is not a listening TCP socket",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_crosses_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("s");
        let host = UnixListener::bind(&path).unwrap_or_else(|e| panic!("bind: {e}"));
        // Port 0: this test runs in the host's namespace, where ports are shared.
        let sender = std::thread::spawn(move || hand_over(&path, 0));
        let listener = receive(&host, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(sender.join(), Ok(Ok(()))));
        let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        assert!(address.ip().is_loopback());
        let client = std::net::TcpStream::connect(address);
        assert!(client.is_ok());
        assert!(listener.accept().is_ok());
    }

    #[test]
    fn anything_but_a_listening_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("s");
        let host = UnixListener::bind(&path).unwrap_or_else(|e| panic!("bind: {e}"));
        let file = std::fs::File::open("/dev/null").unwrap_or_else(|e| panic!("{e}"));
        let sender = std::thread::spawn(move || {
            let stream = UnixStream::connect(&path)?;
            send_fd(&stream, file.as_fd())
        });
        let err = receive(&host, Duration::from_secs(10))
            .err()
            .map(|e| e.to_string());
        assert!(matches!(sender.join(), Ok(Ok(()))));
        assert!(err.is_some_and(|e| e.contains("not a listening TCP socket")));
        // Nothing sent at all times out.
        let idle = UnixListener::bind(dir.path().join("t")).unwrap_or_else(|e| panic!("{e}"));
        let err = receive(&idle, Duration::from_millis(100)).err();
        assert!(err.is_some_and(|e| e.kind() == io::ErrorKind::TimedOut));
    }
}
