//! Which IP addresses a guest's outbound request may be connected to when
//! the allow-listed origin is a name (an origin that names an address
//! literally is the operator's own choice, see `Destination`).
//! (Over 500 lines: about 320 of code; the rest tests each address class
//! an outbound request may or may not reach.)
//!
//! The rule: an address is public only if no entry of the IANA IPv4 or IPv6
//! Special-Purpose Address Registry contains it (every entry, including the
//! few the registry marks globally reachable: anycast relays and AS112 are
//! infrastructure, never an API), it is not multicast, and, for IPv6, it
//! lies in 2000::/3, the only block IANA allocates for global unicast.
//! IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4,
//! Teredo) are refused whole, whatever address they embed. The registries
//! as of 2025 (RFC 9780 is the newest entry):
//! <https://www.iana.org/assignments/iana-ipv4-special-registry/> and
//! <https://www.iana.org/assignments/iana-ipv6-special-registry/>.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One refused block and where it comes from.
#[derive(Debug, PartialEq, Eq)]
pub struct SpecialPurpose {
    pub net: IpNet,
    pub name: &'static str,
    pub rfc: &'static str,
}

/// What an address is, for outbound requests.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Reach {
    Public,
    /// In a special-purpose block (the most specific one that contains it).
    Special(&'static SpecialPurpose),
    /// IPv6 outside 2000::/3 and outside every listed block: not allocated
    /// for global unicast, so nothing legitimate lives there.
    Unallocated,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reach::Public => f.write_str("public"),
            Reach::Special(s) => write!(f, "{} {} ({})", s.net, s.name, s.rfc),
            Reach::Unallocated => f.write_str("not in 2000::/3 (not allocated for global unicast)"),
        }
    }
}

const fn v4(
    a: u8,
    b: u8,
    c: u8,
    d: u8,
    len: u8,
    name: &'static str,
    rfc: &'static str,
) -> SpecialPurpose {
    SpecialPurpose {
        net: IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)),
        name,
        rfc,
    }
}

const fn v6(segments: [u16; 8], len: u8, name: &'static str, rfc: &'static str) -> SpecialPurpose {
    let [a, b, c, d, e, f, g, h] = segments;
    SpecialPurpose {
        net: IpNet::V6(Ipv6Net::new_assert(
            Ipv6Addr::new(a, b, c, d, e, f, g, h),
            len,
        )),
        name,
        rfc,
    }
}

/// Every refused block: both IANA special-purpose registries in registry
/// order, then the few blocks that are refused for other reasons (marked).
pub const SPECIAL_PURPOSE: &[SpecialPurpose] = &[
    // IANA IPv4 Special-Purpose Address Registry.
    v4(0, 0, 0, 0, 8, "This network", "RFC 791"),
    v4(0, 0, 0, 0, 32, "This host on this network", "RFC 1122"),
    v4(10, 0, 0, 0, 8, "Private-Use", "RFC 1918"),
    v4(100, 64, 0, 0, 10, "Shared Address Space", "RFC 6598"),
    v4(127, 0, 0, 0, 8, "Loopback", "RFC 1122"),
    v4(169, 254, 0, 0, 16, "Link Local", "RFC 3927"),
    v4(172, 16, 0, 0, 12, "Private-Use", "RFC 1918"),
    v4(192, 0, 0, 0, 24, "IETF Protocol Assignments", "RFC 6890"),
    v4(
        192,
        0,
        0,
        0,
        29,
        "IPv4 Service Continuity Prefix",
        "RFC 7335",
    ),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address", "RFC 7600"),
    v4(
        192,
        0,
        0,
        9,
        32,
        "Port Control Protocol Anycast",
        "RFC 7723",
    ),
    v4(
        192,
        0,
        0,
        10,
        32,
        "Traversal Using Relays around NAT Anycast",
        "RFC 8155",
    ),
    v4(192, 0, 0, 170, 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    v4(192, 0, 0, 171, 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    v4(192, 0, 2, 0, 24, "Documentation (TEST-NET-1)", "RFC 5737"),
    v4(192, 31, 196, 0, 24, "AS112-v4", "RFC 7535"),
    v4(192, 52, 193, 0, 24, "AMT", "RFC 7450"),
    v4(
        192,
        88,
        99,
        0,
        24,
        "Deprecated (6to4 Relay Anycast)",
        "RFC 7526",
    ),
    v4(192, 168, 0, 0, 16, "Private-Use", "RFC 1918"),
    v4(
        192,
        175,
        48,
        0,
        24,
        "Direct Delegation AS112 Service",
        "RFC 7534",
    ),
    v4(198, 18, 0, 0, 15, "Benchmarking", "RFC 2544"),
    v4(
        198,
        51,
        100,
        0,
        24,
        "Documentation (TEST-NET-2)",
        "RFC 5737",
    ),
    v4(203, 0, 113, 0, 24, "Documentation (TEST-NET-3)", "RFC 5737"),
    v4(240, 0, 0, 0, 4, "Reserved", "RFC 1112"),
    v4(255, 255, 255, 255, 32, "Limited Broadcast", "RFC 919"),
    // IANA IPv6 Special-Purpose Address Registry.
    v6(
        [0, 0, 0, 0, 0, 0, 0, 1],
        128,
        "Loopback Address",
        "RFC 4291",
    ),
    v6([0; 8], 128, "Unspecified Address", "RFC 4291"),
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        "IPv4-mapped Address",
        "RFC 4291",
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4-IPv6 Translat.",
        "RFC 6052",
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "IPv4-IPv6 Translat.",
        "RFC 8215",
    ),
    v6(
        [0x100, 0, 0, 0, 0, 0, 0, 0],
        64,
        "Discard-Only Address Block",
        "RFC 6666",
    ),
    v6(
        [0x100, 0, 0, 1, 0, 0, 0, 0],
        64,
        "Dummy IPv6 Prefix",
        "RFC 9780",
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF Protocol Assignments",
        "RFC 2928",
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "TEREDO", "RFC 4380"),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 1],
        128,
        "Port Control Protocol Anycast",
        "RFC 7723",
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 2],
        128,
        "Traversal Using Relays around NAT Anycast",
        "RFC 8155",
    ),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 3],
        128,
        "DNS-SD Service Registration Protocol Anycast",
        "RFC 9665",
    ),
    v6(
        [0x2001, 2, 0, 0, 0, 0, 0, 0],
        48,
        "Benchmarking",
        "RFC 5180",
    ),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, "AMT", "RFC 7450"),
    v6(
        [0x2001, 4, 0x112, 0, 0, 0, 0, 0],
        48,
        "AS112-v6",
        "RFC 7535",
    ),
    v6(
        [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
        28,
        "Deprecated (previously ORCHID)",
        "RFC 4843",
    ),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2", "RFC 7343"),
    v6(
        [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
        28,
        "Drone Remote ID Protocol Entity Tags (DETs) Prefix",
        "RFC 9374",
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "Documentation",
        "RFC 3849",
    ),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4", "RFC 3056"),
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        "Direct Delegation AS112 Service",
        "RFC 7534",
    ),
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "Documentation",
        "RFC 9637",
    ),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "Segment Routing (SRv6) SIDs",
        "RFC 9602",
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "Unique-Local", "RFC 4193"),
    v6(
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        "Link-Local Unicast",
        "RFC 4291",
    ),
    // Not in the special-purpose registries, refused all the same.
    v4(
        224,
        0,
        0,
        0,
        4,
        "Multicast (not in the registry)",
        "RFC 5771",
    ),
    v6(
        [0; 8],
        96,
        "IPv4-compatible Address (deprecated, not in the registry)",
        "RFC 4291",
    ),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "Site-Local (deprecated, not in the registry)",
        "RFC 3879",
    ),
    v6(
        [0xff00, 0, 0, 0, 0, 0, 0, 0],
        8,
        "Multicast (not in the registry)",
        "RFC 4291",
    ),
];

/// The IPv6 global unicast block.
const GLOBAL_UNICAST: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

/// Classify an address (the most specific block that contains it wins, so
/// the log names e.g. "TEREDO" rather than "IETF Protocol Assignments").
pub fn reach(ip: IpAddr) -> Reach {
    let special = SPECIAL_PURPOSE
        .iter()
        .filter(|s| s.net.contains(&ip))
        .max_by_key(|s| s.net.prefix_len());
    match (special, ip) {
        (Some(s), _) => Reach::Special(s),
        (None, IpAddr::V6(v6)) if !GLOBAL_UNICAST.contains(&v6) => Reach::Unallocated,
        (None, _) => Reach::Public,
    }
}

pub fn is_public(ip: IpAddr) -> bool {
    reach(ip) == Reach::Public
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block, with one address inside and the addresses just before
    /// and just after it, written out by hand (not derived from the table),
    /// each with what it must be: `P` public, `U` unallocated IPv6, or the
    /// name of the block that must contain it.
    #[rustfmt::skip]
    const CASES: &[(&str, &str, &str)] = &[
        // (address, expected, why)
        ("0.0.0.1", "This network", "inside 0/8"),
        ("0.0.0.0", "This host on this network", "inside 0/32"),
        ("1.0.0.0", "P", "just after 0/8"),
        ("9.255.255.255", "P", "just before 10/8"),
        ("10.0.0.0", "Private-Use", "inside 10/8"),
        ("10.255.255.255", "Private-Use", "inside 10/8"),
        ("11.0.0.0", "P", "just after 10/8"),
        ("100.63.255.255", "P", "just before 100.64/10"),
        ("100.64.0.0", "Shared Address Space", "inside 100.64/10"),
        ("100.127.255.255", "Shared Address Space", "inside 100.64/10"),
        ("100.128.0.0", "P", "just after 100.64/10"),
        ("126.255.255.255", "P", "just before 127/8"),
        ("127.0.0.1", "Loopback", "inside 127/8"),
        ("127.255.255.255", "Loopback", "inside 127/8"),
        ("128.0.0.0", "P", "just after 127/8"),
        ("169.253.255.255", "P", "just before 169.254/16"),
        ("169.254.169.254", "Link Local", "inside 169.254/16 (cloud metadata)"),
        ("169.255.0.0", "P", "just after 169.254/16"),
        ("172.15.255.255", "P", "just before 172.16/12"),
        ("172.16.0.0", "Private-Use", "inside 172.16/12"),
        ("172.31.255.255", "Private-Use", "inside 172.16/12"),
        ("172.32.0.0", "P", "just after 172.16/12"),
        ("191.255.255.255", "P", "just before 192.0.0/24"),
        ("192.0.0.7", "IPv4 Service Continuity Prefix", "inside 192.0.0/29"),
        ("192.0.0.8", "IPv4 dummy address", "192.0.0.8/32"),
        ("192.0.0.9", "Port Control Protocol Anycast", "192.0.0.9/32"),
        ("192.0.0.10", "Traversal Using Relays around NAT Anycast", "192.0.0.10/32"),
        ("192.0.0.11", "IETF Protocol Assignments", "inside 192.0.0/24 only"),
        ("192.0.0.170", "NAT64/DNS64 Discovery", "192.0.0.170/32"),
        ("192.0.0.171", "NAT64/DNS64 Discovery", "192.0.0.171/32"),
        ("192.0.0.255", "IETF Protocol Assignments", "inside 192.0.0/24"),
        ("192.0.1.0", "P", "just after 192.0.0/24"),
        ("192.0.1.255", "P", "just before 192.0.2/24"),
        ("192.0.2.1", "Documentation (TEST-NET-1)", "inside 192.0.2/24"),
        ("192.0.3.0", "P", "just after 192.0.2/24"),
        ("192.31.195.255", "P", "just before 192.31.196/24"),
        ("192.31.196.1", "AS112-v4", "inside 192.31.196/24"),
        ("192.31.197.0", "P", "just after 192.31.196/24"),
        ("192.52.192.255", "P", "just before 192.52.193/24"),
        ("192.52.193.1", "AMT", "inside 192.52.193/24"),
        ("192.52.194.0", "P", "just after 192.52.193/24"),
        ("192.88.98.255", "P", "just before 192.88.99/24"),
        ("192.88.99.1", "Deprecated (6to4 Relay Anycast)", "inside 192.88.99/24"),
        ("192.88.100.0", "P", "just after 192.88.99/24"),
        ("192.167.255.255", "P", "just before 192.168/16"),
        ("192.168.1.1", "Private-Use", "inside 192.168/16"),
        ("192.169.0.0", "P", "just after 192.168/16"),
        ("192.175.47.255", "P", "just before 192.175.48/24"),
        ("192.175.48.1", "Direct Delegation AS112 Service", "inside 192.175.48/24"),
        ("192.175.49.0", "P", "just after 192.175.48/24"),
        ("198.17.255.255", "P", "just before 198.18/15"),
        ("198.18.0.0", "Benchmarking", "inside 198.18/15"),
        ("198.19.255.255", "Benchmarking", "inside 198.18/15"),
        ("198.20.0.0", "P", "just after 198.18/15"),
        ("198.51.99.255", "P", "just before 198.51.100/24"),
        ("198.51.100.1", "Documentation (TEST-NET-2)", "inside 198.51.100/24"),
        ("198.51.101.0", "P", "just after 198.51.100/24"),
        ("203.0.112.255", "P", "just before 203.0.113/24"),
        ("203.0.113.1", "Documentation (TEST-NET-3)", "inside 203.0.113/24"),
        ("203.0.114.0", "P", "just after 203.0.113/24"),
        ("223.255.255.255", "P", "just before 224/4"),
        ("224.0.0.1", "Multicast (not in the registry)", "inside 224/4"),
        ("239.255.255.255", "Multicast (not in the registry)", "inside 224/4"),
        ("240.0.0.0", "Reserved", "inside 240/4"),
        ("255.255.255.254", "Reserved", "inside 240/4"),
        ("255.255.255.255", "Limited Broadcast", "255.255.255.255/32"),
        // IPv6.
        ("::1", "Loopback Address", "::1/128"),
        ("::", "Unspecified Address", "::/128"),
        ("::2", "IPv4-compatible Address (deprecated, not in the registry)", "inside ::/96"),
        ("::127.0.0.1", "IPv4-compatible Address (deprecated, not in the registry)", "compatible loopback"),
        ("::8.8.8.8", "IPv4-compatible Address (deprecated, not in the registry)", "compatible, public v4"),
        ("::1:0:0", "U", "just after ::/96"),
        ("::fffe:ffff:ffff", "U", "just before ::ffff:0:0/96"),
        ("::ffff:127.0.0.1", "IPv4-mapped Address", "mapped loopback"),
        ("::ffff:10.0.0.1", "IPv4-mapped Address", "mapped private"),
        ("::ffff:8.8.8.8", "IPv4-mapped Address", "mapped, public v4"),
        ("::1:0:0:0", "U", "just after ::ffff:0:0/96"),
        ("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before 64:ff9b::/96"),
        ("64:ff9b::7f00:1", "IPv4-IPv6 Translat.", "NAT64 of 127.0.0.1"),
        ("64:ff9b::808:808", "IPv4-IPv6 Translat.", "NAT64 of 8.8.8.8"),
        ("64:ff9b::1:0:0", "U", "just after 64:ff9b::/96"),
        ("64:ff9b:0:ffff:ffff:ffff:ffff:ffff", "U", "just before 64:ff9b:1::/48"),
        ("64:ff9b:1::1", "IPv4-IPv6 Translat.", "inside 64:ff9b:1::/48"),
        ("64:ff9b:2::", "U", "just after 64:ff9b:1::/48"),
        ("ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before 100::/64"),
        ("100::1", "Discard-Only Address Block", "inside 100::/64"),
        ("100:0:0:1::1", "Dummy IPv6 Prefix", "inside 100:0:0:1::/64"),
        ("100:0:0:2::", "U", "just after 100:0:0:1::/64"),
        ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before 2000::/3"),
        ("2000::", "P", "first of 2000::/3"),
        ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "P", "just before 2001::/23"),
        ("2001::1", "TEREDO", "inside 2001::/32"),
        ("2001:1::1", "Port Control Protocol Anycast", "2001:1::1/128"),
        ("2001:1::2", "Traversal Using Relays around NAT Anycast", "2001:1::2/128"),
        ("2001:1::3", "DNS-SD Service Registration Protocol Anycast", "2001:1::3/128"),
        ("2001:1::4", "IETF Protocol Assignments", "inside 2001::/23 only"),
        ("2001:2::1", "Benchmarking", "inside 2001:2::/48"),
        ("2001:2:1::", "IETF Protocol Assignments", "just after 2001:2::/48"),
        ("2001:3::1", "AMT", "inside 2001:3::/32"),
        ("2001:4:112::1", "AS112-v6", "inside 2001:4:112::/48"),
        ("2001:4:113::", "IETF Protocol Assignments", "just after 2001:4:112::/48"),
        ("2001:10::1", "Deprecated (previously ORCHID)", "inside 2001:10::/28"),
        ("2001:20::1", "ORCHIDv2", "inside 2001:20::/28"),
        ("2001:30::1", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "inside 2001:30::/28"),
        ("2001:40::", "IETF Protocol Assignments", "just after 2001:30::/28"),
        ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF Protocol Assignments", "inside 2001::/23"),
        ("2001:200::", "P", "just after 2001::/23"),
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "P", "just before 2001:db8::/32"),
        ("2001:db8::1", "Documentation", "inside 2001:db8::/32"),
        ("2001:db9::", "P", "just after 2001:db8::/32"),
        ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "P", "just before 2002::/16"),
        ("2002:7f00:1::", "6to4", "6to4 of 127.0.0.1"),
        ("2003::", "P", "just after 2002::/16"),
        ("2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", "P", "just before 2620:4f:8000::/48"),
        ("2620:4f:8000::1", "Direct Delegation AS112 Service", "inside 2620:4f:8000::/48"),
        ("2620:4f:8001::", "P", "just after 2620:4f:8000::/48"),
        ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "P", "just before 3fff::/20"),
        ("3fff::1", "Documentation", "inside 3fff::/20"),
        ("3fff:1000::", "P", "just after 3fff::/20"),
        ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "P", "last of 2000::/3"),
        ("4000::", "U", "just after 2000::/3"),
        ("5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before 5f00::/16"),
        ("5f00::1", "Segment Routing (SRv6) SIDs", "inside 5f00::/16"),
        ("5f01::", "U", "just after 5f00::/16"),
        ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before fc00::/7"),
        ("fc00::1", "Unique-Local", "inside fc00::/7"),
        ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "Unique-Local", "inside fc00::/7"),
        ("fe00::", "U", "just after fc00::/7"),
        ("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "U", "just before fe80::/10"),
        ("fe80::1", "Link-Local Unicast", "inside fe80::/10"),
        ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "Link-Local Unicast", "inside fe80::/10"),
        ("fec0::1", "Site-Local (deprecated, not in the registry)", "inside fec0::/10"),
        ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "Site-Local (deprecated, not in the registry)", "inside fec0::/10"),
        ("ff02::1", "Multicast (not in the registry)", "inside ff00::/8"),
    ];

    #[test]
    fn every_special_purpose_block_is_refused_and_its_neighbours_are_not() {
        for (addr, expected, why) in CASES {
            let ip: IpAddr = addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
            let got = reach(ip);
            let name = match got {
                Reach::Public => "P",
                Reach::Unallocated => "U",
                Reach::Special(s) => s.name,
            };
            assert_eq!(name, *expected, "{addr} ({why}): {got}");
            assert_eq!(is_public(ip), *expected == "P", "{addr} ({why})");
        }
    }

    /// Every block in the table has at least one address of its own in
    /// `CASES`, so a block added later without a test fails here.
    #[test]
    fn every_block_is_covered_by_a_case() {
        for block in SPECIAL_PURPOSE {
            let covered = CASES.iter().any(|(addr, expected, _)| {
                let ip: IpAddr = addr.parse().unwrap();
                *expected == block.name && reach(ip) == Reach::Special(block)
            });
            assert!(covered, "no case lands in {} {}", block.net, block.name);
        }
    }

    #[test]
    fn ordinary_public_addresses_are_public() {
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "2606:4700::1111",
            "2a00:1450::1",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
