//! The host policy, applied to every hop: which URLs may be fetched at all (scheme, userinfo,
//! port, and a public host: addresses and names classified here). Invariants (INVARIANTS.md):
//! "Fetch policy"; the details are in [`super`].
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use url::{Host, Url};

/// Longest URL fetched.
pub const MAX_URL_LEN: usize = 2048;
/// Ports fetched besides the schemes' defaults (which the parser leaves implicit).
/// Redirects followed per fetch, each one checked like the first URL.
pub const MAX_REDIRECTS: usize = 3;
pub const ALLOWED_PORTS: [u16; 4] = [80, 443, 8080, 8443];

/// Why a URL is not fetched. The text goes back to the model as the function's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Unparsable,
    TooLong,
    Whitespace,
    Scheme,
    Userinfo,
    NoHost,
    /// Loopback, private, link-local, reserved or an internal name.
    Internal,
    Port(u16),
    /// Not in anyone's message nor on a page fetched in this turn: the model composed it.
    NotPosted,
    /// The turn's fetches are used up.
    Limit(usize),
    /// A redirect without a usable `Location`.
    BadRedirect,
    /// A redirect to a URL the policy refuses.
    Redirect(Box<Refusal>),
    TooManyRedirects,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unparsable => write!(f, "not a valid URL"),
            Refusal::TooLong => write!(f, "the URL is longer than {MAX_URL_LEN} characters"),
            Refusal::Whitespace => write!(f, "the URL contains whitespace or control characters"),
            Refusal::Scheme => write!(f, "only http and https URLs can be fetched"),
            Refusal::Userinfo => write!(f, "URLs with a user name or password are not fetched"),
            Refusal::NoHost => write!(f, "the URL has no host"),
            Refusal::Internal => write!(f, "private, loopback, link-local and internal addresses are not fetched"),
            Refusal::Port(p) => write!(f, "port {p} is not fetched (only 80, 443, 8080 and 8443)"),
            Refusal::NotPosted => write!(
                f,
                "refused: this URL does not appear in anyone's message or on a page fetched in this turn; \
                 only links people posted (or links on pages you fetched) can be fetched, never composed or edited ones"
            ),
            Refusal::Limit(n) => write!(f, "at most {n} fetches per turn; answer with what you have"),
            Refusal::BadRedirect => write!(f, "a redirect without a valid Location"),
            Refusal::Redirect(r) => write!(f, "redirect refused: {r}"),
            Refusal::TooManyRedirects => write!(f, "too many redirects (at most {MAX_REDIRECTS})"),
        }
    }
}

/// How a host is classified by the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostClass {
    Public,
    /// 127.0.0.0/8, `::1`, `localhost`: allowed only with `FETCH_ALLOW_PRIVATE`.
    Loopback,
    Internal,
}

/// Checks a URL before fetching it. Returns the URL as it will be fetched (the parser's
/// serialisation, fragment dropped) or why it is refused.
pub fn check_url(raw: &str, allow_loopback: bool) -> Result<Url, Refusal> {
    let raw = raw.trim();
    if raw.len() > MAX_URL_LEN {
        return Err(Refusal::TooLong);
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Refusal::Whitespace);
    }
    let url = Url::parse(raw).map_err(|_| Refusal::Unparsable)?;
    check_parsed(url, allow_loopback)
}

/// [`check_url`] for a URL already parsed (a redirect's target).
pub fn check_parsed(mut url: Url, allow_loopback: bool) -> Result<Url, Refusal> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refusal::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refusal::Userinfo);
    }
    let class = match url.host() {
        None => return Err(Refusal::NoHost),
        Some(host) => classify_host(&host),
    };
    match class {
        HostClass::Public => {}
        HostClass::Loopback if allow_loopback => {}
        _ => return Err(Refusal::Internal),
    }
    if let Some(port) = url.port() {
        let dev = allow_loopback && class == HostClass::Loopback;
        if !dev && !ALLOWED_PORTS.contains(&port) {
            return Err(Refusal::Port(port));
        }
    }
    url.set_fragment(None);
    if url.as_str().len() > MAX_URL_LEN {
        return Err(Refusal::TooLong);
    }
    Ok(url)
}

/// Classifies a parsed host.
pub fn classify_host(host: &Host<&str>) -> HostClass {
    match host {
        Host::Ipv4(ip) => classify_v4(*ip),
        Host::Ipv6(ip) => classify_v6(*ip),
        Host::Domain(name) => classify_domain(name),
    }
}

pub(crate) fn classify_v4(ip: Ipv4Addr) -> HostClass {
    let o = ip.octets();
    if o[0] == 127 {
        return HostClass::Loopback;
    }
    let internal = o[0] == 0 // this network
        || o[0] == 10
        || (o[0] == 100 && (64..128).contains(&o[1])) // shared (CGNAT)
        || (o[0] == 169 && o[1] == 254) // link-local, cloud metadata
        || (o[0] == 172 && (16..32).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 192 && o[1] == 0 && o[2] == 2) // TEST-NET-1
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay
        || (o[0] == 192 && o[1] == 168)
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // benchmarking
        || (o[0] == 198 && o[1] == 51 && o[2] == 100) // TEST-NET-2
        || (o[0] == 203 && o[1] == 0 && o[2] == 113) // TEST-NET-3
        || o[0] >= 224; // multicast, reserved, broadcast
    if internal {
        HostClass::Internal
    } else {
        HostClass::Public
    }
}

pub(crate) fn classify_v6(ip: Ipv6Addr) -> HostClass {
    if ip == Ipv6Addr::LOCALHOST {
        return HostClass::Loopback;
    }
    let s = ip.segments();
    // Only global unicast (2000::/3) is public, minus the ranges that embed an IPv4 address
    // or are not routed: 6to4 2002::/16, Teredo 2001::/32, documentation 2001:db8::/32,
    // benchmarking 2001:2::/48, ORCHID 2001:10::/28 and 2001:20::/28.
    let global = (s[0] & 0xe000) == 0x2000;
    let excluded = s[0] == 0x2002
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x2001 && s[1] == 2 && s[2] == 0)
        || (s[0] == 0x2001 && (s[1] & 0xffe0) == 0x0020)
        || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0010);
    // Everything else — ::/96 (compatible), ::ffff:0:0/96 (mapped), 64:ff9b::/96 (NAT64),
    // fc00::/7, fe80::/10, fec0::/10, ff00::/8, unspecified — is internal.
    if global && !excluded {
        HostClass::Public
    } else {
        HostClass::Internal
    }
}

/// Name suffixes that never name a public host.
pub(crate) const INTERNAL_SUFFIXES: [&str; 21] = [
    "local", "localdomain", "internal", "intranet", "lan", "home", "corp", "private", "home.arpa", "arpa", "test",
    "invalid", "example", "onion", "alt", "internal.cloudapp.net", "svc", "cluster", "intra", "priv", "workgroup",
];
/// Wildcard-DNS services whose names resolve to the address they spell (`127.0.0.1.nip.io`).
pub(crate) const WILDCARD_DNS: [&str; 10] = [
    "nip.io", "sslip.io", "xip.io", "nip.direct", "localtest.me", "lvh.me", "vcap.me", "localhost.direct",
    "traefik.me", "lacolhost.com",
];

pub(crate) fn has_suffix(name: &str, suffix: &str) -> bool {
    name == suffix || name.strip_suffix(suffix).is_some_and(|rest| rest.ends_with('.'))
}

pub(crate) fn classify_domain(name: &str) -> HostClass {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() {
        return HostClass::Internal;
    }
    if has_suffix(&name, "localhost") {
        return HostClass::Loopback;
    }
    if !name.contains('.')
        || INTERNAL_SUFFIXES.iter().any(|s| has_suffix(&name, s))
        || WILDCARD_DNS.iter().any(|s| has_suffix(&name, s))
        || spells_internal_ip(&name)
    {
        return HostClass::Internal;
    }
    HostClass::Public
}

/// Whether a name spells a non-public IPv4 address in four consecutive dotted labels or as a
/// dashed quad inside one label (`10.0.0.1.example`, `app-192-168-1-1.example`).
pub(crate) fn spells_internal_ip(name: &str) -> bool {
    let quads = |parts: &[&str]| -> bool {
        parts.windows(4).any(|w| {
            let octets: Option<Vec<u8>> = w.iter().map(|p| p.parse::<u8>().ok()).collect();
            octets.is_some_and(|o| classify_v4(Ipv4Addr::new(o[0], o[1], o[2], o[3])) != HostClass::Public)
        })
    };
    let labels: Vec<&str> = name.split('.').collect();
    quads(&labels) || labels.iter().any(|l| quads(&l.split('-').collect::<Vec<_>>()))
}
