//! Whose connections wait at a door, and which one goes when the door is full. The test door
//! (`front.rs`) and the metrics endpoint (`exporter.rs`) each keep one.
//!
//! **The rule.** Connections are counted by network as well as by client, in a hierarchy:
//! an IPv4 client's /24; an IPv6 client's /48, then its /64; then the client itself (an
//! address cut to the server's `--ipv4-prefix`/`--ipv6-prefix`). The one to go is found by
//! walking down it: the network holding the most, inside it the client holding the most, and
//! of that client the connection that has waited longest without finishing its handshake.
//! Ties at any level go to whichever holds the connection that has waited longest, never to
//! whichever a hash map lists first. A newcomer takes that place only if, at the first level
//! where its own path and the victim's part, the victim's side holds more than the newcomer's.
//!
//! So a crowd squeezes itself, and a client with few connections always gets in and stays:
//! 8,000 addresses each holding one connection used to tie, and the newest connection — as
//! often a legitimate client's as not — was dropped by hash order; now an address outside the
//! crowd's networks is never the victim, and inside them the oldest waiter goes first (issue
//! 47). A crowd can still take a network's share from a client inside that network: the
//! hierarchy protects what is distinct by prefix, as any rate limit by address must.
//!
//! Each level keeps its children ranked (count, then oldest connection), so the victim is
//! found, and a join or leave recorded, in O(log n): the door's one thread spends the same on
//! an eviction whether 60 or 8,000 addresses crowd it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

/// A place in the hierarchy: its level (0: the /24 or /48, 1: the /24 again or the /64, 2: the
/// client; [`ROOT`] above them) and its address.
type Key = (u8, IpAddr);

/// Above every network.
const ROOT: Key = (u8::MAX, IpAddr::V4(Ipv4Addr::UNSPECIFIED));

/// What one place holds: its waiting connections and the oldest of them (`u64::MAX`: none),
/// and its children ranked (by count, then the oldest first) and by age.
#[derive(Debug, Default)]
struct Node {
    count: usize,
    oldest: u64,
    by_rank: BTreeSet<(usize, Reverse<u64>, Key)>,
    by_age: BTreeSet<(u64, Key)>,
}

/// Each client's waiting connections (tokens, which grow with time: a smaller one waited
/// longer), oldest first, and the hierarchy above them, so that the victim is found in
/// O(log n) whatever the crowd's size.
#[derive(Debug, Default)]
pub(crate) struct Crowd {
    by_client: HashMap<IpAddr, VecDeque<u64>>,
    nodes: HashMap<Key, Node>,
}

/// The path from the top to a client: [`ROOT`], its /24 (IPv4) or /48 (IPv6), its /24 again
/// or its /64, the client. A client key that is already wider (a server counting clients by
/// /16) is its own network.
fn path(client: IpAddr) -> [Key; 4] {
    let cut = |bits: u32| match client {
        IpAddr::V4(a) => {
            IpAddr::V4((u32::from(a) & !u32::MAX.checked_shr(bits).unwrap_or(0)).into())
        }
        IpAddr::V6(a) => {
            IpAddr::V6((u128::from(a) & !u128::MAX.checked_shr(bits).unwrap_or(0)).into())
        }
    };
    let (wide, narrow) = if client.is_ipv4() { (24, 24) } else { (48, 64) };
    [ROOT, (0, cut(wide)), (1, cut(narrow)), (2, client)]
}

impl Crowd {
    /// How many connections `key` holds.
    pub(crate) fn held(&self, key: IpAddr) -> usize {
        self.by_client.get(&key).map_or(0, VecDeque::len)
    }

    /// `key` holds one more, `token`, its newest.
    pub(crate) fn join(&mut self, key: IpAddr, token: u64) {
        self.by_client.entry(key).or_default().push_back(token);
        self.update(key);
    }

    /// `token` of `key` left the door.
    pub(crate) fn leave(&mut self, key: IpAddr, token: u64) {
        let Some(q) = self.by_client.get_mut(&key) else { return };
        q.retain(|t| *t != token);
        if q.is_empty() {
            self.by_client.remove(&key);
        }
        self.update(key);
    }

    /// Carries `client`'s count and oldest connection up its path: at each level the child's
    /// entry in its parent's rankings is replaced, and the parent's figures follow.
    fn update(&mut self, client: IpAddr) {
        let path = path(client);
        let q = self.by_client.get(&client);
        let front = |q: &VecDeque<u64>| q.front().copied().unwrap_or(u64::MAX);
        let mut new = q.map_or((0, u64::MAX), |q| (q.len(), front(q)));
        for level in (0..4).rev() {
            let node = path[level];
            let old = self.nodes.get(&node).map(|n| (n.count, n.oldest));
            if new.0 > 0 {
                let n = self.nodes.entry(node).or_default();
                (n.count, n.oldest) = new;
            } else {
                self.nodes.remove(&node);
            }
            if level == 0 {
                break;
            }
            let p = self.nodes.entry(path[level - 1]).or_default();
            if let Some((count, oldest)) = old {
                p.by_rank.remove(&(count, Reverse(oldest), node));
                p.by_age.remove(&(oldest, node));
            }
            if new.0 > 0 {
                p.by_rank.insert((new.0, Reverse(new.1), node));
                p.by_age.insert((new.1, node));
            }
            let count = p.count + new.0 - old.map_or(0, |o| o.0);
            new = (count, p.by_age.first().map_or(u64::MAX, |(o, _)| *o));
        }
    }

    /// What `key` holds at each level of its path below the root.
    fn standing(&self, key: &[Key; 4]) -> [usize; 3] {
        [1, 2, 3].map(|i| self.nodes.get(&key[i]).map_or(0, |n| n.count))
    }

    /// The connection to close to make room for a newcomer of client `newcomer` (None: for
    /// no one, whatever it is), by the module's rule, and how many its client holds.
    pub(crate) fn victim(&self, newcomer: Option<IpAddr>) -> Option<(u64, usize)> {
        self.victim_by(newcomer, 1)
    }

    /// [`Crowd::victim`] with the victim's side holding at least `margin` more than the
    /// newcomer's where their paths part (a margin of 2 leaves the victim's side holding at
    /// least as much as the newcomer's after the exchange, so two sides never trade places
    /// back and forth).
    pub(crate) fn victim_by(
        &self,
        newcomer: Option<IpAddr>,
        margin: usize,
    ) -> Option<(u64, usize)> {
        let mut theirs = [ROOT; 4];
        for level in 1..4 {
            let (_, _, child) = *self.nodes.get(&theirs[level - 1])?.by_rank.last()?;
            theirs[level] = child;
        }
        let q = self.by_client.get(&theirs[3].1)?;
        if let Some(mine) = newcomer {
            let ours = path(mine);
            // The first level where the paths part decides; the same client never gives way.
            let level = (1..4).find(|&i| theirs[i] != ours[i])?;
            if self.standing(&theirs)[level - 1] < self.standing(&ours)[level - 1] + margin {
                return None;
            }
        }
        Some((*q.front()?, q.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(c: u8, d: u8) -> IpAddr {
        IpAddr::from([127, 3, c, d])
    }

    #[test]
    fn the_busiest_client_gives_way_to_a_smaller_one_only() {
        let (a, b) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
        let mut c = Crowd::default();
        for t in 1..=3 {
            c.join(a, t);
        }
        c.join(b, 10);
        let newcomer = IpAddr::from([127, 0, 0, 4]);
        assert_eq!(c.victim(Some(newcomer)), Some((1, 3)), "a holds 3, more than the newcomer's 0");
        assert_eq!(c.victim(Some(a)), None, "a newcomer of a takes no place of its own");
        c.leave(a, 1);
        assert_eq!(c.victim(None), Some((2, 2)));
        c.leave(a, 2);
        c.leave(a, 3);
        assert_eq!(c.held(a), 0);
        assert_eq!(c.victim(None), Some((10, 1)));
        c.leave(b, 10);
        assert!(c.nodes.is_empty() && c.victim(None).is_none());
    }

    /// The rule by brute force: every client's path, compared level by level.
    fn reference(c: &Crowd, newcomer: Option<IpAddr>) -> Option<(u64, usize)> {
        let count = |k: &Key| -> usize {
            let level = k.0;
            c.by_client
                .iter()
                .filter(|(client, _)| path(**client)[usize::from(level) + 1] == *k)
                .map(|(_, q)| q.len())
                .sum()
        };
        let oldest = |k: &Key| -> u64 {
            c.by_client
                .iter()
                .filter(|(client, _)| path(**client)[usize::from(k.0) + 1] == *k)
                .filter_map(|(_, q)| q.front().copied())
                .min()
                .unwrap_or(u64::MAX)
        };
        let (client, q) = c.by_client.iter().max_by_key(|(client, _)| {
            let p = path(**client);
            (
                count(&p[1]),
                Reverse(oldest(&p[1])),
                count(&p[2]),
                Reverse(oldest(&p[2])),
                count(&p[3]),
                Reverse(oldest(&p[3])),
            )
        })?;
        if let Some(mine) = newcomer {
            let (theirs, ours) = (path(*client), path(mine));
            let level = (1..4).find(|&i| theirs[i] != ours[i])?;
            let held = |k: &Key| if c.by_client.is_empty() { 0 } else { count(k) };
            if held(&theirs[level]) <= held(&ours[level]) {
                return None;
            }
        }
        Some((*q.front()?, q.len()))
    }

    #[test]
    fn the_index_picks_what_the_rule_says() {
        // Random joins and leaves over a few networks, against the brute-force rule.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut c = Crowd::default();
        let mut held: Vec<(IpAddr, u64)> = Vec::new();
        for token in 1..2000u64 {
            let client = match rnd(3) {
                0 => IpAddr::from([127, 3, rnd(3) as u8, rnd(6) as u8]),
                1 => {
                    IpAddr::from([0xfd00, rnd(2) as u16, 0, rnd(3) as u16, 0, 0, 0, rnd(4) as u16])
                }
                _ => IpAddr::from([127, 0, 0, rnd(4) as u8]),
            };
            if rnd(3) == 0 && !held.is_empty() {
                let (k, t) = held.swap_remove(rnd(held.len() as u64) as usize);
                c.leave(k, t);
            } else {
                c.join(client, token);
                held.push((client, token));
            }
            let newcomer = IpAddr::from([127, 3, rnd(3) as u8, rnd(6) as u8]);
            assert_eq!(c.victim(Some(newcomer)), reference(&c, Some(newcomer)), "at {token}");
            assert_eq!(c.victim(None), reference(&c, None), "at {token}");
        }
        for (k, t) in held {
            c.leave(k, t);
        }
        assert!(c.nodes.is_empty() && c.by_client.is_empty());
    }

    /// The crowd's churn: `newcomer` arrives, the victim goes, and the victim's client is the
    /// next to arrive (it reopens what was closed), `rounds` times; `protected` must never go.
    fn churn(c: &mut Crowd, mut newcomer: IpAddr, rounds: usize, protected: u64, token: &mut u64) {
        for round in 0..rounds {
            let (gone, _) = c.victim(Some(newcomer)).unwrap_or_else(|| {
                panic!("round {round}: no room for {newcomer}: {:?}", c.standing(&path(newcomer)))
            });
            assert_ne!(gone, protected, "round {round}: the protected connection was dropped");
            let holder = c.by_client.iter().find(|(_, q)| q.contains(&gone)).map(|(k, _)| *k);
            let holder = holder.expect("a holder");
            c.leave(holder, gone);
            *token += 1;
            c.join(newcomer, *token);
            newcomer = holder;
        }
    }

    #[test]
    fn among_equals_the_longest_waiter_goes_never_the_newest() {
        // 250 addresses of one /24, one connection each, then a legitimate client of the same
        // /24: while it finishes its handshake, the crowd's reconnections take the places of
        // the crowd's longest waiters, never its newer one (hash order took either).
        let mut c = Crowd::default();
        let mut token = 0;
        for d in 1..=250 {
            token += 1;
            c.join(v4(0, d), token);
        }
        let legit = v4(0, 251);
        assert_eq!(c.victim(Some(legit)), Some((1, 1)), "the longest waiter makes room");
        c.leave(v4(0, 1), 1);
        c.join(legit, 10_000);
        churn(&mut c, v4(0, 1), 200, 10_000, &mut token);
    }

    #[test]
    fn a_client_outside_the_crowds_networks_is_never_the_victim() {
        // 8,000 addresses across 32 /24s, one connection each; a client of another /24 stays
        // however long the crowd churns.
        let mut c = Crowd::default();
        let mut token = 0;
        for i in 0..8000u32 {
            token += 1;
            c.join(v4((i / 250) as u8, (i % 250) as u8 + 1), token);
        }
        let legit = IpAddr::from([127, 0, 0, 2]);
        let (gone, _) = c.victim(Some(legit)).expect("it gets in");
        let first = v4(0, 1);
        c.leave(first, gone);
        c.join(legit, 1_000_000);
        churn(&mut c, first, 16_000, 1_000_000, &mut token);
        // IPv6: a /48 full of /64s, against a client of another /48.
        let mut c = Crowd::default();
        for i in 0..300u16 {
            c.join(IpAddr::from([0xfd00, 1, 0, i, 0, 0, 0, 0]), u64::from(i) + 1);
        }
        assert_eq!(c.victim(Some(IpAddr::from([0xfd00, 2, 0, 9, 0, 0, 0, 0]))), Some((1, 1)));
        c.leave(IpAddr::from([0xfd00, 1, 0, 0, 0, 0, 0, 0]), 1);
        c.join(IpAddr::from([0xfd00, 2, 0, 0, 0, 0, 0, 0]), 5_000);
        let mut token = 10_000;
        churn(&mut c, IpAddr::from([0xfd00, 1, 0, 0, 0, 0, 0, 0]), 900, 5_000, &mut token);
    }
}
