//! The egress allowlist: which `host:port` targets the proxy may open a
//! tunnel to, and which addresses need to be named by their own number.
//!
//! A rule is `HOST:PORT`. HOST is a name (`crates.io`), a name under a
//! wildcard label (`*.pypi.org`: any name ending in `.pypi.org`, at any
//! depth, but not `pypi.org` itself), or an address (`127.0.0.1`, `[::1]`).
//! The port is always a number: there is no port wildcard, since a name
//! allowed on every port is a name allowed for every protocol. Letter case
//! and a trailing dot on names are ignored.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A rule or target that is not `HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a network rule: {why}; write HOST:PORT, e.g. crates.io:443 or *.pypi.org:443"
)]
pub struct RuleError {
    pub text: String,
    pub why: &'static str,
}

/// Which hosts a rule covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// One name, lower case, without a trailing dot.
    Name(String),
    /// Names ending in this suffix (which starts with a dot).
    Under(String),
    /// One address.
    Address(IpAddr),
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: HostMatch,
    port: u16,
}

impl Rule {
    /// Parses `HOST:PORT` (see the module documentation).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |why| RuleError {
            text: text.to_string(),
            why,
        };
        let (host, port) = split_host_port(text).map_err(err)?;
        let host = if let Some(rest) = host.strip_prefix("*.") {
            let name = normalize_name(rest).map_err(err)?;
            if !name.contains('.') {
                return Err(err(
                    "a wildcard needs at least two labels after it (*.example.org)",
                ));
            }
            HostMatch::Under(format!(".{name}"))
        } else if let Ok(address) = host.parse::<IpAddr>() {
            HostMatch::Address(address)
        } else {
            HostMatch::Name(normalize_name(host).map_err(err)?)
        };
        Ok(Rule { host, port })
    }

    /// Whether this rule covers `target`.
    fn covers(&self, target: &Target) -> bool {
        if self.port != target.port {
            return false;
        }
        match (&self.host, &target.host) {
            (HostMatch::Address(rule), TargetHost::Address(address)) => rule == address,
            (HostMatch::Name(rule), TargetHost::Name(name)) => rule == name,
            (HostMatch::Under(suffix), TargetHost::Name(name)) => name.ends_with(suffix.as_str()),
            _ => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Name(name) => write!(f, "{name}:{}", self.port),
            HostMatch::Under(suffix) => write!(f, "*{suffix}:{}", self.port),
            HostMatch::Address(IpAddr::V6(v6)) => write!(f, "[{v6}]:{}", self.port),
            HostMatch::Address(IpAddr::V4(v4)) => write!(f, "{v4}:{}", self.port),
        }
    }
}

/// The host of a `CONNECT` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetHost {
    Name(String),
    Address(IpAddr),
}

/// Where a `CONNECT` request asks to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: TargetHost,
    pub port: u16,
}

impl Target {
    /// Parses the authority of a `CONNECT` request (`host:port`, `[v6]:port`).
    pub fn parse(text: &str) -> Result<Target, RuleError> {
        let err = |why| RuleError {
            text: text.to_string(),
            why,
        };
        let (host, port) = split_host_port(text).map_err(err)?;
        let host = match host.parse::<IpAddr>() {
            Ok(address) => TargetHost::Address(address),
            Err(_) => TargetHost::Name(normalize_name(host).map_err(err)?),
        };
        Ok(Target { host, port })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            TargetHost::Name(name) => write!(f, "{name}:{}", self.port),
            TargetHost::Address(IpAddr::V6(v6)) => write!(f, "[{v6}]:{}", self.port),
            TargetHost::Address(IpAddr::V4(v4)) => write!(f, "{v4}:{}", self.port),
        }
    }
}

/// The rules of one run, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    rules: Vec<Rule>,
}

impl Allowlist {
    /// Parses every rule; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Allowlist, RuleError> {
        let rules = rules
            .iter()
            .map(|rule| Rule::parse(rule.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Allowlist { rules })
    }

    /// The first rule that covers `target`.
    pub fn matching(&self, target: &Target) -> Option<&Rule> {
        self.rules.iter().find(|rule| rule.covers(target))
    }

    /// Whether a rule names `address` on `port` by its number: the only way
    /// to reach a loopback, link-local or private address.
    pub fn names_address(&self, address: IpAddr, port: u16) -> bool {
        let address = canonical(address);
        self.rules.iter().any(|rule| {
            rule.port == port
                && matches!(rule.host, HostMatch::Address(a) if canonical(a) == address)
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Addresses a name must not lead to unless named itself: this host
/// (loopback, unspecified), the local networks (private, shared, link-local,
/// unique local), and multicast and broadcast.
pub fn is_internal(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_multicast()
        || v4.is_broadcast()
        || a == 0
        // 100.64.0.0/10, shared address space (carrier NAT, some VPNs).
        || (a == 100 && (64..128).contains(&b))
}

fn internal_v6(v6: Ipv6Addr) -> bool {
    let first = v6.segments()[0];
    v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        // fc00::/7 unique local, fe80::/10 link-local.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
}

/// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is its IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Splits `host:port` or `[v6]:port`; the port must be a number from 1.
fn split_host_port(text: &str) -> Result<(&str, u16), &'static str> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err("the part in [] is not an IPv6 address");
        }
        let port = after
            .strip_prefix(':')
            .ok_or("no :PORT after the address")?;
        (host, port)
    } else {
        text.rsplit_once(':').ok_or("no :PORT")?
    };
    if port == "*" {
        return Err("the port must be a number: there is no port wildcard");
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|port| *port > 0)
        .ok_or("the port is not a number from 1 to 65535")?;
    if host.is_empty() {
        return Err("no host");
    }
    Ok((host, port))
}

/// A host name in lower case without its trailing dot, made only of
/// letters, digits, `-`, `_` and dots, with no empty label.
fn normalize_name(host: &str) -> Result<String, &'static str> {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if name.is_empty() || name.len() > 253 {
        return Err("the host name is empty or too long");
    }
    if name.contains('*') {
        return Err("a wildcard may only be the whole first label (*.example.org)");
    }
    let valid = name.split('.').all(|label| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if !valid {
        return Err("the host name has an empty label or a character not allowed in names");
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(text: &str) -> Target {
        Target::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn list(rules: &[&str]) -> Allowlist {
        Allowlist::parse(rules).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn names_match_exactly_and_wildcards_match_subdomains_only() {
        let allow = list(&["crates.io:443", "*.pypi.org:443"]);
        assert!(allow.matching(&target("crates.io:443")).is_some());
        assert!(allow.matching(&target("CRATES.IO.:443")).is_some());
        assert!(allow.matching(&target("crates.io:80")).is_none());
        assert!(allow.matching(&target("static.crates.io:443")).is_none());
        assert!(allow.matching(&target("files.pypi.org:443")).is_some());
        assert!(allow.matching(&target("a.b.pypi.org:443")).is_some());
        assert!(allow.matching(&target("pypi.org:443")).is_none());
        assert!(allow.matching(&target("evilpypi.org:443")).is_none());
        assert!(allow.matching(&target("pypi.org.evil.com:443")).is_none());
    }

    #[test]
    fn addresses_match_only_addresses() {
        let allow = list(&["127.0.0.1:8080", "[::1]:8080", "localhost:9000"]);
        assert!(allow.matching(&target("127.0.0.1:8080")).is_some());
        assert!(allow.matching(&target("[::1]:8080")).is_some());
        assert!(allow.matching(&target("127.0.0.2:8080")).is_none());
        assert!(
            allow.names_address(
                "127.0.0.1"
                    .parse()
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                8080
            )
        );
        assert!(
            allow.names_address(
                "::ffff:127.0.0.1"
                    .parse()
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                8080
            )
        );
        // A name rule never vouches for the address the name resolves to.
        assert!(!allow.names_address(IpAddr::V4(Ipv4Addr::LOCALHOST), 9000));
        assert!(!allow.names_address(IpAddr::V4(Ipv4Addr::LOCALHOST), 8081));
    }

    #[test]
    fn bad_rules_say_why() {
        for (text, why) in [
            ("crates.io", "no :PORT"),
            ("crates.io:*", "no port wildcard"),
            ("crates.io:0", "from 1 to 65535"),
            ("crates.io:70000", "from 1 to 65535"),
            ("*:443", "whole first label"),
            ("*.org:443", "two labels"),
            ("a.*.org:443", "whole first label"),
            ("exa mple.org:443", "not allowed"),
            ("a..b:443", "empty label"),
            ("[::1:443", "closing ]"),
            (":443", "no host"),
        ] {
            let err = Rule::parse(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn rules_print_as_written() {
        for text in [
            "crates.io:443",
            "*.pypi.org:443",
            "127.0.0.1:80",
            "[::1]:80",
        ] {
            assert_eq!(
                Rule::parse(text).map(|r| r.to_string()).ok().as_deref(),
                Some(text)
            );
        }
    }

    #[test]
    fn internal_addresses_are_recognised() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
        ] {
            let address: IpAddr = text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(is_internal(address), "{text}");
        }
        for text in ["1.1.1.1", "151.101.1.1", "2a04:4e42::1", "100.128.0.1"] {
            let address: IpAddr = text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(!is_internal(address), "{text}");
        }
    }
}
