//! Whose connections wait at a door, and which one goes when the door is full: the oldest
//! of the client holding the most, and only if that client holds more than the newcomer's.
//! A crowd from many addresses then squeezes itself, and a client with few connections always
//! gets in (issue 35: a crowd that could fill the door kept every legitimate client out).
//! The test door (`front.rs`) and the metrics endpoint (`exporter.rs`) each keep one.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// Each client's waiting connections (tokens), oldest first; a client is whatever key the
/// door counts by (an address cut to a prefix).
#[derive(Debug, Default)]
pub(crate) struct Crowd {
    by_client: HashMap<IpAddr, VecDeque<u64>>,
}

impl Crowd {
    /// How many connections `key` holds.
    pub(crate) fn held(&self, key: IpAddr) -> usize {
        self.by_client.get(&key).map_or(0, VecDeque::len)
    }

    /// `key` holds one more, `token`, its newest.
    pub(crate) fn join(&mut self, key: IpAddr, token: u64) {
        self.by_client.entry(key).or_default().push_back(token);
    }

    /// `token` of `key` left the door.
    pub(crate) fn leave(&mut self, key: IpAddr, token: u64) {
        if let Some(q) = self.by_client.get_mut(&key) {
            q.retain(|t| *t != token);
            if q.is_empty() {
                self.by_client.remove(&key);
            }
        }
    }

    /// The connection to close to make room: the oldest of the client holding the most, and
    /// how many that client holds, if it holds more than `than` (None: whatever it holds).
    pub(crate) fn victim(&self, than: Option<usize>) -> Option<(u64, usize)> {
        let (_, q) = self.by_client.iter().max_by_key(|(_, q)| q.len())?;
        if than.is_some_and(|mine| q.len() <= mine) {
            return None;
        }
        Some((*q.front()?, q.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_client_gives_way_to_a_smaller_one_only() {
        let (a, b) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
        let mut c = Crowd::default();
        for t in 1..=3 {
            c.join(a, t);
        }
        c.join(b, 10);
        assert_eq!(c.victim(Some(1)), Some((1, 3)), "a holds 3, more than the newcomer's 1");
        assert_eq!(c.victim(Some(3)), None, "a newcomer whose client holds 3 takes no place");
        c.leave(a, 1);
        assert_eq!(c.victim(None), Some((2, 2)));
        c.leave(a, 2);
        c.leave(a, 3);
        assert_eq!(c.held(a), 0);
        assert_eq!(c.victim(None), Some((10, 1)));
    }
}
