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

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

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
    send_fd(&stream, listener.as_raw_fd())
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
    let mut poll = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, owned by this frame.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    match ready {
        n if n < 0 => Err(io::Error::last_os_error()),
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the sandbox did not hand over the proxy socket in time",
        )),
        _ => listener.accept(),
    }
}

/// Room for one `cmsghdr` carrying one descriptor, aligned for it.
#[repr(C, align(8))]
struct Control([u8; 64]);

fn send_fd(stream: &UnixStream, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 64]);
    // SAFETY: CMSG_* compute sizes and pointers inside `control`, which is
    // large enough and aligned for one header with one descriptor; msghdr is
    // plain data and zero is a valid value for each of its fields.
    let sent = unsafe {
        let space = libc::CMSG_SPACE(size_of::<RawFd>() as u32) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::other("no room for the control message"));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(stream.as_raw_fd(), &msg, 0)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn recv_fd(stream: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 64]);
    // SAFETY: as in `send_fd`; the kernel writes at most `msg_controllen`
    // bytes into `control`, and a received descriptor is owned by us.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let got = libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || ((*cmsg).cmsg_len as usize) < libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize
        {
            return Err(io::Error::other("the sandbox sent no socket"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Refuses a descriptor that is not a listening IPv4 TCP socket.
fn check_listening_tcp(fd: &OwnedFd) -> io::Result<()> {
    let option = |name: libc::c_int| -> io::Result<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one c_int into `value`.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(value)
        }
    };
    // A descriptor that is no socket at all fails getsockopt.
    let is = |name, value| option(name).is_ok_and(|v| v == value);
    if is(libc::SO_ACCEPTCONN, 1)
        && is(libc::SO_DOMAIN, libc::AF_INET)
        && is(libc::SO_TYPE, libc::SOCK_STREAM)
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
            send_fd(&stream, file.as_raw_fd())
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
