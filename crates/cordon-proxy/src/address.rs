//! Which destination addresses the proxy refuses, whatever name led there: loopback,
//! private, shared (CGNAT), link-local (the cloud metadata address among them), multicast,
//! unspecified and reserved ranges, and IPv6 forms embedding those.
//!
//! The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)
//! are not refused: they are no one's internal network, and intercepting network set-ups
//! (the CI machines cordon is tested on among them) answer public names with them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` must not be connected to, or `None` when it is a public unicast address.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "an unspecified address (0.0.0.0/8)",
        (10, _, _) => "a private address (10.0.0.0/8)",
        (100, 64..=127, _) => "a shared address (100.64.0.0/10, carrier-grade NAT)",
        (127, _, _) => "a loopback address (127.0.0.0/8)",
        (169, 254, _) => "a link-local address (169.254.0.0/16, cloud metadata)",
        (172, 16..=31, _) => "a private address (172.16.0.0/12)",
        (192, 0, 0) => "a reserved address (192.0.0.0/24)",
        (192, 168, _) => "a private address (192.168.0.0/16)",
        (198, 18..=19, _) => "a benchmarking address (198.18.0.0/15)",
        (224..=239, _, _) => "a multicast address (224.0.0.0/4)",
        (240..=255, _, _) => "a reserved or broadcast address (240.0.0.0/4)",
        _ => return None,
    })
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("an unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("a loopback address (::1)");
    }
    // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) forms reach the IPv4
    // address they embed; NAT64 (64:ff9b::/96) is translated to it by the network.
    let seg = ip.segments();
    let embedded = Ipv4Addr::new(
        (seg[6] >> 8) as u8,
        seg[6] as u8,
        (seg[7] >> 8) as u8,
        seg[7] as u8,
    );
    let mapped = seg[..5] == [0; 5] && seg[5] == 0xffff;
    let compatible = seg[..6] == [0; 6];
    let nat64 = seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    if mapped || compatible || nat64 {
        return refusal_v4(embedded).or(compatible.then_some("an IPv4-compatible address"));
    }
    Some(match seg[0] {
        0xfc00..=0xfdff => "a unique local address (fc00::/7)",
        0xfe80..=0xfebf => "a link-local address (fe80::/10)",
        0xfec0..=0xfeff => "a site-local address (fec0::/10)",
        0xff00..=0xffff => "a multicast address (ff00::/8)",
        0x0100 if seg[1..4] == [0, 0, 0] => "a discard address (100::/64)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        refusal(text.parse().unwrap()).is_some()
    }

    #[test]
    fn internal_ranges_are_refused() {
        for ip in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "224.0.0.251",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "151.101.1.1",
            "203.0.113.80",
            "2606:4700::1111",
            "2a04:4e42::223",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!refused(ip), "{ip} must pass");
        }
    }
}
