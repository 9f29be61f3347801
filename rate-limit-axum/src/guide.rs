//! The guides, each doctested where it stands: start with [`getting_started`].
//!
//! | guide | crate |
//! |---|---|
//! | [`getting_started`]: a limited axum service, per client and per player, then on Redis | here |
//! | [`from_tower_governor`]: the same service before and after, what maps to what, what differs | here |
//! | [`keys`](crate::tower::guide::keys): the client IP behind proxies, IPv6, API keys and hashing | tower |
//! | [`limits`](crate::core::guide::limits): algorithms, chains, budgets, the shared pacer | core |
//! | [`costs`](crate::tower::guide::costs): a weight or a size per request, counting only failures | tower |
//! | [`stores`](crate::core::guide::stores): memory, Redis, Cluster, Sentinel, TLS, ACL, the check at start | core |
//! | [`failure`](crate::tower::guide::failure): what each rule does when the store is down | tower |
//! | [`answers`](crate::tower::guide::answers): headers, browsers, problem details, gRPC | tower |
//! | [`controls`](crate::tower::guide::controls): delays, in-flight limits, bans, allow and deny lists | tower |
//! | [`metrics`](crate::tower::guide::metrics): series, the decision's span, logs | tower |
//! | [`client`](crate::tower::guide::client): pacing calls to an upstream by what it says, one pace for a fleet | tower |
//! | [`ratekeeper_admin::guide`](https://docs.rs/ratekeeper-admin/latest/ratekeeper_admin/guide/): the admin API and operator's page, heavy hitters, for one instance or a fleet | `ratekeeper-admin` |
//! | `ratekeeper_axum::ws` (feature `ws`): limits inside a WebSocket, each message checked, graded answers | here |
//! | [`operating`](crate::core::guide::operating): what a freeze, a failover, a full memory cost | core |
//! | [`store_contract`](crate::core::guide::store_contract): the Redis store's keys, scripts and costs | core |

#[doc = include_str!("../docs/getting-started.md")]
pub mod getting_started {}

// The before and after are files of their own so that the repository's test serves the
// very code shown here (`tests/axum/governor.rs`); both compile here as doctests.
#[doc = include_str!("../docs/from-tower-governor.md")]
#[doc = "## Before: tower_governor\n\n```rust,no_run"]
#[doc = include_str!("../docs/from-tower-governor/before.rs")]
#[doc = "```\n\n## After: ratekeeper-axum\n\n```rust,no_run"]
#[doc = include_str!("../docs/from-tower-governor/after.rs")]
#[doc = "```"]
#[doc = include_str!("../docs/from-tower-governor-differences.md")]
pub mod from_tower_governor {}
