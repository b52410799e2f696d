//! What the sandbox may reach on the network. By default nothing: the
//! container has no network at all. With [`NetworkMode::Proxy`] it still has
//! none, but a proxy on the host ([`proxy`]) listens on its
//! `127.0.0.1:PROXY_PORT` ([`handoff`]) and opens `CONNECT` tunnels to the
//! `host:port` targets an allowlist ([`allow`]) names. [`NetworkMode::Full`]
//! gives the container a user-mode network stack (slirp4netns or pasta).

pub mod allow;
pub mod handoff;
pub mod proxy;

pub use allow::{Allowlist, RuleError};
pub use handoff::PROXY_PORT;
pub use proxy::{EgressDecision, Proxy};

/// How much network the sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// No network at all (the default).
    #[default]
    None,
    /// Only `CONNECT` tunnels to allowlisted `host:port` targets, through
    /// a proxy on the host.
    Proxy,
    /// Full outbound network through a user-mode stack (slirp4netns or
    /// pasta): anything the container can reach, the model can.
    Full,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Proxy => "proxy",
            NetworkMode::Full => "full",
        }
    }
}

/// The proxy's address as the container's programs see it.
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}
