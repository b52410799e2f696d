//! The command channel between the host and its sandbox: instead of one
//! `podman exec` per command (~120 ms each), one long-lived agent inside
//! the container runs the commands it is sent. `frame` is the wire format,
//! `agent` the side inside the container (`ah __sandbox-agent`), `sweep`
//! how the agent ends every process a command started, `memory` what it
//! tells of its memory cgroup. The host side, which treats everything the
//! agent sends as hostile, is `podman::channel`.

pub mod agent;
mod changes;
pub mod frame;
pub mod init;
mod memory;
mod sweep;
