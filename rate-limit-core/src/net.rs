//! Blocks of IP addresses, as access lists name them: one parser for the configuration
//! file and the Tower layer's lists.

use std::net::IpAddr;

/// A block of IP addresses: a CIDR (`10.0.0.0/8`, `2001:db8::/32`) or one address
/// (`192.0.2.7`, `::1`). Host bits under the prefix are ignored (`10.0.0.1/8` is
/// `10.0.0.0/8`).
///
/// ```
/// use ratekeeper_core::net::IpBlock;
///
/// let block: IpBlock = "10.0.0.0/8".parse().unwrap();
/// assert!(block.contains("10.1.2.3".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<IpBlock>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpBlock {
    /// IPv4 addresses `first..=last`.
    V4 {
        /// The block's first address.
        first: u32,
        /// The block's last address.
        last: u32,
    },
    /// IPv6 addresses `first..=last`.
    V6 {
        /// The block's first address.
        first: u128,
        /// The block's last address.
        last: u128,
    },
}

/// Not a CIDR or an IP address.
///
/// You meet it only parsing an `IpBlock` yourself: allow and deny lists and
/// `ClientIp::trusted_proxies_parse` turn it into a `ConfigError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAnIpBlock;

impl std::fmt::Display for NotAnIpBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address")
    }
}

impl std::error::Error for NotAnIpBlock {}

impl std::str::FromStr for IpBlock {
    type Err = NotAnIpBlock;

    fn from_str(entry: &str) -> Result<Self, NotAnIpBlock> {
        let entry = entry.trim();
        let (addr, len) = match entry.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (entry, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| NotAnIpBlock)?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => bits,
            Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => l
                .parse::<u32>()
                .ok()
                .filter(|&l| l <= bits)
                .ok_or(NotAnIpBlock)?,
            Some(_) => return Err(NotAnIpBlock),
        };
        Ok(match addr {
            IpAddr::V4(a) => {
                let host = u32::MAX.checked_shr(len).unwrap_or(0);
                let first = u32::from(a) & !host;
                Self::V4 {
                    first,
                    last: first | host,
                }
            }
            IpAddr::V6(a) => {
                let host = u128::MAX.checked_shr(len).unwrap_or(0);
                let first = u128::from(a) & !host;
                Self::V6 {
                    first,
                    last: first | host,
                }
            }
        })
    }
}

impl IpBlock {
    /// Whether `ip` lies in the block (an IPv4 address never lies in an IPv6 block).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (Self::V4 { first, last }, IpAddr::V4(a)) => (*first..=*last).contains(&u32::from(a)),
            (Self::V6 { first, last }, IpAddr::V6(a)) => (*first..=*last).contains(&u128::from(a)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IpBlock;

    #[test]
    fn cidrs_and_addresses_parse_and_nothing_else_does() {
        let b = |s: &str| s.parse::<IpBlock>();
        assert_eq!(
            b("10.0.0.1/8"),
            Ok(IpBlock::V4 {
                first: 0x0a00_0000,
                last: 0x0aff_ffff
            })
        );
        assert_eq!(
            b(" 192.0.2.7 "),
            Ok(IpBlock::V4 {
                first: 0xc000_0207,
                last: 0xc000_0207
            })
        );
        assert!(matches!(
            b("::/0"),
            Ok(IpBlock::V6 {
                first: 0,
                last: u128::MAX
            })
        ));
        assert!(matches!(
            b("0.0.0.0/0"),
            Ok(IpBlock::V4 {
                first: 0,
                last: u32::MAX
            })
        ));
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/+8",
            "10.0.0.0/",
            "host",
            "10.0.0/8",
            "1.2.3.4/8/8",
        ] {
            assert!(b(bad).is_err(), "{bad:?}");
        }
    }
}
